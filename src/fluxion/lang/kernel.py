"""`@ti.kernel`: registration, the template signature, argument binding and instances.

Decorating compiles nothing. A call computes the template signature (template arguments by
identity or value, scalar arguments by their annotated type); the first call with a new
signature compiles an instance through the compile driver (compiler/driver.py), later ones
reuse it (`kernel.instances`); an instance's launch is runtime/launch.py's. `@ti.func` and
what both decorators share are in lang/decorated.py.
"""
from __future__ import annotations

import os
import inspect
import sys
import types as pytypes
import weakref

from fluxion.compiler import driver
from fluxion.ir.modes import DUAL, GRAD, PRIMAL, RECORD, VALIDATE
from fluxion.ir import builder
from fluxion.ir import stmts as S
from fluxion.lang import runtime
from fluxion.ir import types as T
from fluxion.frontend import real_func
from fluxion.frontend.access import ArrayValue
from fluxion.frontend.places import KernelBase
from fluxion.frontend.struct import build_struct, struct_leaves
from fluxion.frontend.transformer import MatVar, StructVar, Transformer, Var
from fluxion.ir.builder import BuildContext, building
from fluxion.ir.errors import (FluxionError, FluxionRuntimeTypeError, FluxionSignatureError,
                               FluxionSyntaxError, FluxionTypeError)
from fluxion.ir.expr import Expr
from fluxion.lang import ad
from fluxion.lang import array_args
from fluxion.lang import kernel_cache
from fluxion.lang import sparse_writes
from fluxion.lang.array_args import pack_array
from fluxion.lang.launch_values import MatrixReturn
from fluxion.lang import field as _field_mod
from fluxion.lang import ndarray as ndarray_mod
from fluxion.lang.matrix import Matrix, MatrixType
from fluxion.lang.ndarray import ArrayArg, NdarrayType
from fluxion.lang.struct import Struct, StructType
from fluxion.lang.argpack import ArgPack, ArgPackType, build_value as build_pack_value
from fluxion.runtime.args import Checked, MatrixArg, NdarrayArg, ScalarArg, StructArg
from fluxion.runtime import jit
from fluxion.runtime.launch import Instance

# the names other modules import from here (Instance too)
_ScalarArg, _MatrixArg, _StructArg, _NdarrayArg, _Checked = (ScalarArg, MatrixArg, StructArg,
                                                              NdarrayArg, Checked)


from fluxion.frontend.builtins import loop_config, template  # noqa: F401
from fluxion.lang.decorated import (_Decorated, _defined_in_class, Func, func, is_template,  # noqa: F401
                                   pyfunc)


class Kernel(_Decorated, KernelBase):
    def __init__(self, func):
        _Decorated.__init__(self, func)
        self.is_method = _defined_in_class(func)
        self._instances = {}
        self._generation = -1
        self._arg_specs = None
        self._packs = ()
        self._template_checks = {}
        self._static_key = None
        self._ret_types = None
        self.no_grad = False

    def __get__(self, obj, owner=None):
        # a kernel defined in a class, reached through an instance: a kernel of that object
        # (`self` is a template argument), as with the original's @ti.data_oriented classes
        if obj is None or not self.is_method:
            return self
        return BoundKernel(self, obj)

    @property
    def instances(self):
        """Compiled instances, keyed by template signature (read-only)."""
        self._check_generation()
        return pytypes.MappingProxyType(self._instances)

    def _check_generation(self):
        gen = runtime.state().generation
        if self._generation != gen:
            self._instances = {}
            self._generation = gen
            self._arg_specs = None
            self._static_key = None

    def _specs(self):
        if self._arg_specs is None:
            specs = []
            packs = []
            checks = {}
            hints = self._resolved_annotations()
            for name, p in self.params().items():
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    raise FluxionSignatureError(self._where(
                        f"kernel '{self.name}': *args/**kwargs are not supported (Taichi kernels "
                        f"do not support variable parameters)"))
                ann = hints.get(name, p.annotation)
                if ann is inspect.Parameter.empty and self.is_method and not specs:
                    ann = template     # `self` of a kernel method
                if ann is inspect.Parameter.empty:
                    raise FluxionSignatureError(self._where(
                        f"Taichi kernels parameters must be type annotated: kernel "
                        f"'{self.name}': argument '{name}' needs a type annotation "
                        f"(e.g. ti.i32, ti.f32, ti.template())"))
                if isinstance(ann, ArgPackType):
                    # a pack is flattened: one argument per member ("pack.member")
                    packs.append((name, ann))
                    for leaf, t in ann.leaves(name + "."):
                        specs.append((leaf, self._spec_of(leaf, t)))
                else:
                    if is_template(ann) and hasattr(ann, "check_argument"):
                        # (ti.types.sparse_matrix_builder(): checked once per instance)
                        checks[name] = ann.check_argument
                    specs.append((name, self._spec_of(name, ann)))
            self._packs = tuple(packs)
            ret = hints.get("return", self._sig.return_annotation)
            if isinstance(ret, ArgPackType):
                raise FluxionSyntaxError(self._where(
                    f"kernel '{self.name}': an argument pack cannot be returned"))
            if ret is inspect.Signature.empty or ret is None:
                self._ret_types = ()
                self._ret_shape = None
            elif isinstance(ret, MatrixType):
                self._ret_types = (ret.dtype,) * (ret.n * ret.m)
                self._ret_shape = MatrixReturn(ret)
            elif isinstance(ret, (tuple, list)) and all(isinstance(r, T.DataType) for r in ret):
                # several values come back as a list, one as itself (as in the original)
                self._ret_types = tuple(T.normalize(r) for r in ret)
                self._ret_shape = list if len(ret) != 1 else "scalar"
            elif isinstance(ret, T.DataType) or ret in (int, float, bool):
                self._ret_types = (T.normalize(ret),)
                self._ret_shape = "scalar"
            else:
                # structs, and tuples (`(ti.f32, s)`, `tuple[...]`, `typing.Tuple[...]`) of
                # scalars, vectors and structs: their scalars in order, rebuilt at the return
                items, is_tuple = real_func.parse_return(ret, f"kernel '{self.name}'")
                self._ret_types = tuple(dt for a in items for dt in real_func.leaf_types(a))
                self._ret_shape = ReturnSpec(items, is_tuple)
            # the static key before the specs: another thread that finds the specs set must
            # not read a stale key
            self._static_key = tuple(sp.dtype for _, sp in specs) if all(
                isinstance(sp, (ScalarArg, MatrixArg, StructArg)) for _, sp in specs) else None
            self._template_checks = checks
            self._arg_specs = specs
        return self._arg_specs

    def _spec_of(self, name, ann):
        """How argument `name` annotated `ann` is passed (None: a template)."""
        if is_template(ann):
            return None
        if isinstance(ann, NdarrayType) or ann is NdarrayType:
            return NdarrayArg(ann if isinstance(ann, NdarrayType) else NdarrayType())
        if isinstance(ann, MatrixType):
            return MatrixArg(ann, Matrix)
        if isinstance(ann, StructType):
            return StructArg(ann, struct_leaves(ann), Matrix, Struct)
        try:
            return ScalarArg(T.normalize(ann))
        except TypeError:
            raise FluxionSignatureError(self._where(
                f"Invalid type annotation of kernel '{self.name}': unsupported "
                f"annotation {ann!r} for argument '{name}'")) from None

    def _resolved_annotations(self):
        try:
            return inspect.get_annotations(self.func, eval_str=True)
        except Exception:
            return {}

    # -- calling ----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        torch = _modules.get("torch")
        if torch is not None and torch.compiler.is_compiling():
            return _eager_under_dynamo(torch)(Kernel.__call__, self, args, kwargs)
        # the common case first: no autodiff context around the launch
        if not ad._fwd_stack and not ad._tape_stack:
            return self._launch(args, kwargs, PRIMAL)
        fwd = ad.current_fwd()
        if fwd is not None:
            if fwd.entries is not None:
                fwd.entries.append((self, args, kwargs))
            return self._launch(args, kwargs, DUAL)
        tape = ad.current_tape()
        if tape is not None and not self.no_grad:
            tape.record(self, args, kwargs)
            if tape.validation and runtime.config().debug:
                return self._launch(args, kwargs, VALIDATE)
            return self._launch(args, kwargs, RECORD, tape=tape)
        return self._launch(args, kwargs, PRIMAL)

    def _launch(self, args, kwargs, mode, grads=None, tape=None, checked=None):
        """`checked`: a Checked tuple of ndarray arguments whose every access is
        bound-checked in this launch's instance (outputs of a torch_function)."""
        if builder.active[0] and builder.in_kernel():
            raise FluxionTypeError(f"kernel '{self.name}' cannot be called from inside a kernel")
        if self._generation != runtime._state.generation:
            self._check_generation()
        if _field_mod._pending:
            _field_mod.check_placed()         # fields made since the last launch
        specs = self._arg_specs or self._specs()
        if kwargs or len(args) != len(specs) or self._packs:
            # (_packs: argument packs pass their members as arguments of their own)
            args = self._bind(args, kwargs, specs)
        arrays = None
        if self._static_key is not None and mode is PRIMAL and checked is None:
            key = self._static_key          # scalar arguments only: the signature never varies
        else:
            # grad and dual instances depend on which fields have grads and duals
            key = [] if mode is PRIMAL else [mode, _ad_fields_version()]
            for pos, ((name, spec), a) in enumerate(zip(specs, args)):
                if spec is None:
                    key.append(_template_key(a))
                elif type(spec) is NdarrayArg:
                    if arrays is None:
                        arrays = {}
                    info = array_args.array_info(spec.ann, a, self.name, name, spec.cache)
                    arrays[pos] = info
                    key.append(info[0])
                else:
                    key.append(spec.dtype)
            if checked:
                key.append(checked)         # last, after one entry per argument
            key = tuple(key)
        inst = self._instances.get(key)
        if inst is None:
            inst = self._instantiate(key, args, specs, mode)
        if mode is RECORD:
            return tape.launch_logged(inst, args, arrays)
        return inst.launch(args, arrays, mode, grads)

    def _instantiate(self, key, args, specs, mode):
        """Compile the instance for `key`, once even when several threads launch it first at
        the same time; only a finished instance enters the cache."""
        with runtime.compile_lock:
            if self._generation != runtime._state.generation:
                self._check_generation()
            inst = self._instances.get(key)   # another thread may have just compiled it
            if inst is not None:
                return inst
            try:
                inst = kernel_cache.instantiate(self, key, args, specs, mode)
            except FluxionError as e:
                if os.environ.get("FLUXION_FULL_TRACEBACK") or \
                        runtime.config().print_full_traceback:
                    raise
                # the message carries the user's location; compiler frames would only distract
                raise e.with_traceback(None) from None
            self._instances[key] = inst
            for part in key:
                if type(part) is _ObjectKey:
                    _forget_with(part, self, key)
            return inst

    def _bind(self, args, kwargs, specs):
        try:
            bound = self.bind(args, kwargs, lambda: f"kernel '{self.name}'")
        except FluxionSignatureError as e:
            raise FluxionSignatureError(self._where(str(e))) from None
        if not self._packs:
            return tuple(bound[n] for n, _ in specs)
        # argument packs pass their members as arguments of their own
        packs = dict(self._packs)
        out = []
        for name in self.params():
            v = bound[name]
            ptype = packs.get(name)
            if ptype is None:
                out.append(v)
                continue
            if isinstance(v, dict):
                v = ptype(**v)
            if not isinstance(v, ArgPack) or (v._type is not ptype and [
                    n for n, _ in v._type.leaves()] != [n for n, _ in ptype.leaves()]):
                raise FluxionRuntimeTypeError(self._where(
                    f"kernel '{self.name}': argument '{name}' expects a pack of {ptype!r}, got "
                    f"{type(v).__name__}"))
            out.extend(v.leaf_values())
        return tuple(out)

    def _compile(self, key, args, specs, mode=PRIMAL, build_only=False):
        """Compile the instance of `key` through the compile driver: an `Instance`, or with
        `build_only` the IR after the pipeline for the CUDA target (`ptx`)."""
        runtime.ensure_initialized()
        cfg = runtime.config()
        layout = []
        target = driver.CUDA_IR if build_only else driver.current_target()
        program = driver.compile_kernel(
            lambda: self._build_ir(key, args, specs, mode, cfg, layout), mode, target, cfg,
            sparse_writes.instrument_writes)
        if build_only:
            return program
        ret_types = () if mode.reverse else self._ret_types
        inst = Instance(self, key, program.code, layout, ret_types, self._ret_shape)
        inst.tape_log_capacity = program.tape_log_capacity
        inst.trees = program.trees
        inst.build_taint = program.build_taint
        inst.outer_reads = program.outer_reads
        return inst

    def _build_ir(self, key, args, specs, mode, cfg, layout):
        """The frontend build of one instance: each argument bound to its IR value (a
        template argument to itself), then the body. Fills `layout` (per argument: None for a
        template, else (first context slot, spec)); returns (IR, build context)."""
        src = self.source()
        checked = key[-1] if key and type(key[-1]) is Checked else ()
        arg_types = []
        ir = S.Kernel(self.name, arg_types, self._ret_types)
        if isinstance(self._ret_shape, ReturnSpec):
            ir.ret_spec = self._ret_shape
        ctx = BuildContext(ir, cfg, forward_locals=True)
        with building(ctx):
            ctx.loc = src.loc(src.tree)
            bound = {}
            slot = 0

            def load(dtype):
                nonlocal slot
                arg_types.append(dtype)
                slot += 1
                return Expr(builder.emit(S.ArgLoadStmt(slot - 1, ret_type=dtype)))

            for (name, spec), a in zip(specs, args):
                if spec is None:
                    check = self._template_checks.get(name)
                    if check is not None:
                        check(a, self.name, name)
                    bound[name] = a
                    layout.append(None)
                elif isinstance(spec, NdarrayArg):
                    desc = key[len(layout) + (0 if mode is PRIMAL else 2)]
                    arg = ArrayArg(name, desc, slot, pack_array)
                    arg.no_grad = getattr(spec.ann, "needs_grad", None) is False
                    arg.clamp = getattr(spec.ann, "boundary", None) == "clamp"
                    arg.checked = name in checked
                    arg_types.extend([T.i64] * arg.nslots)
                    # (a texture annotation names its own kernel-side value: lang/texture.py)
                    bound[name] = getattr(spec.ann, "kernel_value", ArrayValue)(arg)
                    layout.append((slot, arg))
                    slot += arg.nslots
                elif isinstance(spec, StructArg):
                    first = slot
                    values = [load(dt) for _, dt in spec.leaves]
                    bound[name] = StructVar(build_struct(spec.stype, iter(values)))
                    layout.append((first, spec))
                elif isinstance(spec, ScalarArg):
                    layout.append((slot, spec))
                    bound[name] = Var(spec.dtype, load(spec.dtype))
                else:
                    first = slot
                    entries = [load(spec.dtype) for _ in range(spec.count)]
                    mt = spec.mtype
                    bound[name] = MatVar(Matrix._make(entries, mt.n, mt.m, mt.ndim), spec.dtype)
                    layout.append((first, spec))
            for pname, ptype in self._packs:
                bound[pname] = build_pack_value(ptype, bound, pname)
            Transformer(src, self.globals(), self.name).build_function(bound)
            builder.drop_unread_locals()
        return ir, ctx

    def ptx(self, *args, sm=90, **kwargs):
        """The PTX that the CUDA backend makes of this kernel for these arguments (works
        without a GPU; field addresses are placeholders there). Check it with ptxas."""
        self._check_generation()
        specs = self._arg_specs or self._specs()
        args = self._bind(args, kwargs, specs)
        key = ["ptx"]
        for pos, ((name, spec), a) in enumerate(zip(specs, args)):
            if spec is None:
                key.append(_template_key(a))
            elif type(spec) is NdarrayArg:
                key.append(array_args.array_info(spec.ann, a, self.name, name, spec.cache)[0])
            else:
                key.append(spec.dtype)
        cfg = runtime.config()
        with runtime.compile_lock:
            # built as a CUDA session builds it (its index checks), whatever this session is
            saved = cfg.check_accesses, cfg.check_writes
            cfg.check_accesses = runtime.checks_accesses(cfg, runtime.cuda)
            cfg.check_writes = runtime.checks_writes(cfg, runtime.cuda)
            try:
                ir = self._compile(tuple(key[1:]), args, specs, PRIMAL, build_only=True)
            finally:
                cfg.check_accesses, cfg.check_writes = saved
        ptx, _ = jit.kernel_to_ptx(ir, sm, cfg.fast_math,
                                   address_of=lambda place: place.addr)
        return ptx

    def grad(self, *args, **kwargs):
        """Run the adjoint of this kernel: reads the grads of what it wrote, accumulates into
        the grads of what it read. Compiled once per template signature, like the primal."""
        torch = _modules.get("torch")
        if torch is not None and torch.compiler.is_compiling():
            return _eager_under_dynamo(torch)(Kernel.grad, self, args, kwargs)
        return self._launch(args, kwargs, GRAD)


_modules = sys.modules
_eager_run = None


def _run(method, kernel, args, kwargs):
    return method(kernel, *args, **kwargs)


def _eager_under_dynamo(torch):
    """`_run`, hidden from TorchDynamo. A kernel call in a function compiled by torch.compile
    must not be traced: Dynamo would turn the data pointers and shapes that the launch reads
    from tensors into constants of the compiled frame, and a later call would hand the kernel
    a stale pointer. Under tracing (`is_compiling()` is true only then) the call goes through
    `torch.compiler.disable`, so the compiled function breaks its graph there and launches
    the kernel eagerly; outside of it, launches pay only the `is_compiling()` test."""
    global _eager_run
    if _eager_run is None:
        _eager_run = torch.compiler.disable(_run)
    return _eager_run


def _ad_fields_version():
    return _field_mod.ad_fields_version[0]


class ReturnSpec:
    """A kernel's return annotation made of structs or tuples: its items (DataType,
    MatrixType, StructType) and whether it is a tuple."""

    def __init__(self, items, is_tuple):
        self.items, self.is_tuple = items, is_tuple

    def rebuild(self, vals):
        """The Python value of the returned scalars `vals`: numbers, Matrix and Struct values,
        a list of them for a tuple annotation."""
        it = iter(vals)
        out = [real_func.rebuild(a, it) for a in self.items]
        # (a list for several items, as the original returns them; one item alone)
        return out if self.is_tuple and len(out) != 1 else out[0]


def _template_key(a):
    if type(a) in _FIELD_TYPES:        # the common case: a field, by identity
        return a
    if isinstance(a, (int, float, str, bool, type(None))) or isinstance(a, T.DataType):
        return (type(a), a)
    if getattr(type(a), "_data_oriented", False):
        return _ObjectKey(a)
    if isinstance(a, ndarray_mod.Ndarray):
        # its elements are not compile-time values: as in the original system
        raise FluxionRuntimeTypeError(
            "Ndarray shouldn't be passed in via `ti.template()`, please annotate your kernel "
            "using `ti.types.ndarray(...)` instead")
    if isinstance(a, tuple):
        try:
            hash(a)
            return (tuple, a)
        except TypeError:
            pass
    return a if _identity_hashable(a) else ("id", id(a))


_FIELD_TYPES = frozenset((_field_mod.ScalarField, _field_mod.MatrixField))
real_func._python_scope.template_key = _template_key   # (real functions key on it too)


def _identity_hashable(a):
    try:
        hash(a)
        return True
    except TypeError:
        return False


class _ObjectKey:
    """A @ti.data_oriented object in a template signature: by identity, weakly held (the
    kernel's cache must not keep the object alive; an instance compiled for it reads its
    attributes as compile-time values). Two objects that compare equal by value are still
    two signatures: their fields differ."""
    __slots__ = ("ref", "ident", "__weakref__")

    def __init__(self, obj):
        self.ident = id(obj)
        try:
            self.ref = weakref.ref(obj)
        except TypeError:              # no weak references (__slots__): held strongly
            self.ref = lambda obj=obj: obj

    def __hash__(self):
        return self.ident

    def __eq__(self, other):
        if type(other) is not _ObjectKey or other.ident != self.ident:
            return False
        mine = self.ref()
        return mine is not None and mine is other.ref()

    def __repr__(self):
        obj = self.ref()
        return f"<{type(obj).__name__} object at {self.ident:#x}>" if obj is not None else \
            "<dead object>"


def _forget_with(part, kernel, key):
    """Drop the instance of `key` when the data-oriented object of `part` dies."""
    obj = part.ref()
    if obj is None:
        return
    try:
        weakref.finalize(obj, _forget, weakref.ref(kernel), key)
    except TypeError:                  # not weakly referenceable: held by the key anyway
        pass


def _forget(kernel_ref, key):
    k = kernel_ref()
    if k is not None:
        k._instances.pop(key, None)


class BoundKernel:
    """A kernel method reached through an instance (`obj.step`): calling it passes `obj` as
    the kernel's `self`; `.grad(...)` likewise runs the adjoint."""
    __slots__ = ("kernel", "obj", "__weakref__")

    def __init__(self, kernel, obj):
        self.kernel, self.obj = kernel, obj

    def _check(self):
        cls = type(self.obj)
        if not getattr(cls, "_data_oriented", False):
            raise FluxionSyntaxError(f"Please decorate class {cls.__name__} with "
                                     f"@ti.data_oriented: kernel '{self.kernel.name}' is one "
                                     f"of its methods")

    def __call__(self, *args, **kwargs):
        self._check()
        return self.kernel(self.obj, *args, **kwargs)

    def grad(self, *args, **kwargs):
        self._check()
        return self.kernel.grad(self.obj, *args, **kwargs)

    @property
    def __name__(self):
        return self.kernel.name

    @property
    def instances(self):
        return self.kernel.instances

    def __repr__(self):
        return f"<bound kernel {self.kernel.name} of {self.obj!r}>"


def data_oriented(cls):
    """`@ti.data_oriented`: a class whose methods may be kernels (`@ti.kernel def step(self):
    ...`) and functions (`@ti.func`), with fields as attributes (`self.x[i]`). In a kernel,
    `self` is a compile-time value: its attributes are read when the kernel is compiled for
    that object (fields are accessed, Python numbers become constants)."""
    cls._data_oriented = True
    return cls


def kernel(fn=None, **_):
    if fn is None:
        return lambda f: kernel(f)
    k = Kernel(fn)
    k.check_annotations("kernel")
    return k
