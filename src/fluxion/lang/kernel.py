"""`@ti.kernel` and `@ti.func`: registration, template instantiation, caching and launch.

Decorating compiles nothing. A call computes the template signature (template arguments by
identity or value, scalar arguments by their annotated type); the first call with a new
signature compiles an instance, later ones reuse it (`kernel.instances`).
"""
from __future__ import annotations

import functools
import os
import inspect
import operator
import sys
import time
import types as pytypes
import weakref

import numpy as np

from fluxion.ir import builder
from fluxion.frontend.source import SourceInfo
from fluxion.ir import stmts as S
from fluxion.lang import runtime
from fluxion.ir import types as T
from fluxion.ir.errors import (FluxionArgumentError, FluxionError, FluxionRuntimeError,
                                     FluxionRuntimeTypeError,
                                     FluxionSignatureError, FluxionTypeError, format_location)
from fluxion.lang import ad
from fluxion.lang import field as _field_mod
from fluxion.lang import ndarray as ndarray_mod
from fluxion.lang.matrix import Matrix, MatrixType
from fluxion.lang.ndarray import ArrayArg, NdarrayType
from fluxion.lang.struct import StructType
from fluxion.lang.argpack import ArgPack, ArgPackType, build_value as build_pack_value


class template:  # noqa: N801  (the original system's name)
    """Annotation of a compile-time argument: a field, or any Python value."""

    def __init__(self, tensor=None, dim=None):
        pass


def is_template(ann):
    return ann is template or isinstance(ann, template)


def loop_config(*, serialize=False, block_dim=None, parallelize=None, block_dim_adaptive=True,
                bit_vectorize=False):
    """Configure the next for loop of a kernel (`serialize=True` runs it in order)."""
    # only meaningful inside a kernel, where the frontend intercepts the call
    return None


def _globals_of(func):
    g = dict(func.__globals__)
    if func.__closure__:
        for name, cell in zip(func.__code__.co_freevars, func.__closure__):
            try:
                g[name] = cell.cell_contents
            except ValueError:
                pass
    return g


class _Decorated:
    def __init__(self, func):
        functools.update_wrapper(self, func)
        self.func = func
        self.name = func.__name__
        self._src = None
        self._sig = inspect.signature(func)
        self._hints = None

    def source(self):
        if self._src is None:
            self._src = SourceInfo(self.func)
        return self._src

    def signature(self):
        return self._sig

    def params(self):
        return self._sig.parameters

    def globals(self):
        return _globals_of(self.func)

    def hints(self):
        """Annotations by name ("return" included), string ones evaluated where possible
        (`from __future__ import annotations`)."""
        if self._hints is None:
            hints = dict(getattr(self.func, "__annotations__", None) or {})
            g = None
            for k, v in hints.items():
                if isinstance(v, str):
                    g = g if g is not None else self.globals()
                    try:
                        hints[k] = eval(v, g)  # noqa: S307 - the user's own annotation
                    except Exception:
                        pass
            self._hints = hints
        return self._hints

    def check_annotations(self, kind):
        """At decoration, as the original system does: each parameter annotation must name a
        type here. A string one (`from __future__ import annotations`) is evaluated now; one
        that names nothing, or an object no parameter can have, is an error."""
        g = None
        for i, (name, p) in enumerate(self.params().items()):
            ann = p.annotation
            if ann is inspect.Parameter.empty:
                continue
            if isinstance(ann, str):
                g = g if g is not None else self.globals()
                try:
                    ann = eval(ann, g)  # noqa: S307 - the user's own annotation
                except Exception:
                    raise FluxionSignatureError(self._where(
                        f"Invalid type annotation (argument {i}) of {kind} '{self.name}': "
                        f"{p.annotation!r} names no type here (annotate '{name}' with the "
                        f"type itself, e.g. ti.f32)")) from None
            if kind == "kernel" and not _valid_kernel_annotation(ann):
                raise FluxionSignatureError(self._where(
                    f"Invalid type annotation (argument {i}) of kernel '{self.name}': {ann!r} "
                    f"(argument '{name}' takes a data type such as ti.f32, "
                    f"ti.types.vector(...), ti.types.ndarray(...), a struct type or "
                    f"ti.template())"))

    def bind(self, args, kwargs, describe):
        """The arguments by parameter name, in order (defaults filled), or the original
        system's errors: too many, missing, unknown or repeated."""
        params = self.params()
        if any(p.kind != p.POSITIONAL_OR_KEYWORD for p in params.values()):
            try:
                ba = self._sig.bind(*args, **kwargs)
            except TypeError as e:
                raise FluxionSignatureError(f"{describe()}: {e}") from None
            ba.apply_defaults()
            return ba.arguments
        names = list(params)
        if len(args) > len(names):
            expected = ", ".join(self._param_text(n) for n in names)
            got = ", ".join(repr(a) for a in args)[:200]
            raise FluxionSignatureError(f"Too many arguments. Expected ({expected}), got "
                                        f"({got}): {describe()} takes {len(names)}")
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in params:
                raise FluxionSignatureError(f"Unexpected argument '{k}': {describe()} has no "
                                            f"parameter '{k}'")
            if k in bound:
                raise FluxionSignatureError(f"Multiple values for argument '{k}' in the call "
                                            f"of {describe()}")
            bound[k] = v
        out = {}
        for n in names:
            if n in bound:
                out[n] = bound[n]
            elif params[n].default is not inspect.Parameter.empty:
                out[n] = params[n].default
            else:
                raise FluxionSignatureError(f"Parameter `{self._param_text(n)}` missing in the "
                                            f"call of {describe()}")
        return out

    def _param_text(self, name):
        ann = self.hints().get(name, inspect.Parameter.empty)
        if ann is inspect.Parameter.empty:
            return name
        if is_template(ann):
            return f"{name} : template"
        return f"{name} : {ann!r}" if not isinstance(ann, type) else f"{name} : {ann.__name__}"

    def _where(self, message):
        try:
            src = self.source()
        except OSError:
            return message
        return "\n" + format_location(src.loc(src.tree), message)


def _valid_kernel_annotation(ann):
    if is_template(ann) or ann is NdarrayType or ann in (int, float, bool):
        return True
    if isinstance(ann, (NdarrayType, MatrixType, StructType, T.DataType, ArgPackType)):
        return True
    try:
        T.from_numpy_dtype(ann)
        return True
    except Exception:
        return False


def _defined_in_class(func):
    """Whether `func` was defined in a class body (its qualified name says so): then it is a
    method, and `self` binds to the instance it is reached through."""
    parts = func.__qualname__.split(".")
    return len(parts) > 1 and parts[-2] != "<locals>"


class Func(_Decorated):
    """`@ti.func`: inlined into the kernels that call it; callable from Python scope too."""

    def __call__(self, *args, **kwargs):
        if builder.in_kernel():
            raise RuntimeError("ti.func called through Python inside a kernel build")
        return self.func(*args, **kwargs)

    def __get__(self, obj, owner=None):
        # a ti.func method reached through an instance: `self.f(i)` in a kernel inlines f
        # with `self` bound to the instance (a compile-time value, like a template)
        if obj is None or not _defined_in_class(self.func):
            return self
        from fluxion.lang.struct import _BoundMethod
        return _BoundMethod(self, obj)


def func(fn):
    f = Func(fn)
    f.check_annotations("ti.func")
    return f


def pyfunc(fn):
    return Func(fn)



# -- arguments ----------------------------------------------------------------------------------
class _ScalarArg:
    __slots__ = ("dtype", "is_float", "lo", "hi")

    def __init__(self, dtype):
        self.dtype = dtype
        self.is_float = dtype.is_float
        # the values a Python int may have for this argument (checked on every launch)
        # (the fast path's: values that fit the int64 slot as they are)
        self.lo, self.hi = _int_range(dtype) if dtype.is_int else (0, -1)
        self.hi = min(self.hi, (1 << 63) - 1)


def _int_range(dtype):
    if dtype.is_signed:
        return -(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1
    return 0, (1 << dtype.bits) - 1


def _int_slot_value(v, dtype):
    """What an int64 context slot holds for integer argument `v` of type `dtype` (u64 values
    above 2**63 as their two's-complement bit pattern), or None where `v` is no integer or
    out of the type's range: the kernel would see another value (a wrapped one, or a float
    truncated), so the launch raises instead. bool and NumPy integers are integers; floats
    are not, even integral ones, as in the original system."""
    if isinstance(v, (float, np.floating, complex, np.complexfloating, str, bytes)):
        return None
    if isinstance(v, np.bool_):
        v = bool(v)                    # (NumPy 2's bool has no __index__)
    try:
        v = operator.index(v)          # int, bool, NumPy integers, 0-d integer tensors
    except TypeError:
        return None
    if dtype.bits == 1:
        return int(v != 0)             # a u1 argument takes the truth of an integer
    lo, hi = _int_range(dtype)
    if not lo <= v <= hi:
        return None
    return v - (1 << 64) if v >= 1 << 63 else v


class _MatrixArg:
    __slots__ = ("mtype", "dtype", "count")

    def __init__(self, mtype):
        self.mtype = mtype
        self.dtype = mtype.dtype
        self.count = mtype.n * mtype.m


class _StructArg:
    """A struct argument: one context slot per scalar member, in member order."""
    __slots__ = ("stype", "leaves", "dtype")

    def __init__(self, stype):
        self.stype = stype
        self.leaves = _struct_leaves(stype)        # (path, scalar dtype)
        self.dtype = ("struct", id(stype))

    def flatten(self, value):
        out = []
        for path, _ in self.leaves:
            v = value
            for k in path[:-1]:
                v = v[k] if isinstance(v, dict) else getattr(v, k)
            last = path[-1]
            if isinstance(last, int):
                v = v.entries[last] if isinstance(v, Matrix) else list(np.ravel(v))[last]
            else:
                v = v[last] if isinstance(v, dict) else getattr(v, last)
            out.append(v)
        return out


def _struct_leaves(stype, prefix=()):
    from fluxion.lang.struct import StructType
    out = []
    for k in stype.members:
        t = stype.member_type(k)
        if isinstance(t, StructType):
            out.extend(_struct_leaves(t, prefix + (k,)))
        elif isinstance(t, MatrixType):
            out.extend(((prefix + (k, c)), t.dtype) for c in range(t.n * t.m))
        else:
            out.append((prefix + (k,), t))
    return out


class _Checked(tuple):
    """The names of the ndarray arguments whose accesses an instance bound-checks; the last
    entry of its key."""
    __slots__ = ()


class _NdarrayArg:
    __slots__ = ("ann", "cache")

    def __init__(self, ann):
        self.ann = ann
        self.cache = {}   # array kind -> checked Desc, so a launch only reads the pointer


class Kernel(_Decorated):
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
                from fluxion.ir.errors import FluxionSyntaxError
                raise FluxionSyntaxError(self._where(
                    f"kernel '{self.name}': an argument pack cannot be returned"))
            if ret is inspect.Signature.empty or ret is None:
                self._ret_types = ()
                self._ret_shape = None
            elif isinstance(ret, MatrixType):
                self._ret_types = (ret.dtype,) * (ret.n * ret.m)
                self._ret_shape = ret
            elif isinstance(ret, (tuple, list)) and all(isinstance(r, T.DataType) for r in ret):
                self._ret_types = tuple(T.normalize(r) for r in ret)
                self._ret_shape = tuple
            elif isinstance(ret, T.DataType) or ret in (int, float, bool):
                self._ret_types = (T.normalize(ret),)
                self._ret_shape = "scalar"
            else:
                # structs, and tuples (`(ti.f32, s)`, `tuple[...]`, `typing.Tuple[...]`) of
                # scalars, vectors and structs: their scalars in order, rebuilt at the return
                from fluxion.frontend import real_func
                items, is_tuple = real_func.parse_return(ret, f"kernel '{self.name}'")
                self._ret_types = tuple(dt for a in items for dt in real_func.leaf_types(a))
                self._ret_shape = ReturnSpec(items, is_tuple)
            # the static key before the specs: another thread that finds the specs set must
            # not read a stale key
            self._static_key = tuple(sp.dtype for _, sp in specs) if all(
                isinstance(sp, (_ScalarArg, _MatrixArg, _StructArg)) for _, sp in specs) else None
            self._template_checks = checks
            self._arg_specs = specs
        return self._arg_specs

    def _spec_of(self, name, ann):
        """How argument `name` annotated `ann` is passed (None: a template)."""
        if is_template(ann):
            return None
        if isinstance(ann, NdarrayType) or ann is NdarrayType:
            return _NdarrayArg(ann if isinstance(ann, NdarrayType) else NdarrayType())
        if isinstance(ann, MatrixType):
            return _MatrixArg(ann)
        if isinstance(ann, StructType):
            return _StructArg(ann)
        try:
            return _ScalarArg(T.normalize(ann))
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
            return self._launch(args, kwargs, "primal")
        fwd = ad.current_fwd()
        if fwd is not None:
            if fwd.entries is not None:
                fwd.entries.append((self, args, kwargs))
            return self._launch(args, kwargs, "dual")
        tape = ad.current_tape()
        if tape is not None and not self.no_grad:
            tape.record(self, args, kwargs)
            if tape.validation and runtime.config().debug:
                return self._launch(args, kwargs, "validate")
            return self._launch(args, kwargs, "record", tape=tape)
        return self._launch(args, kwargs, "primal")

    def _launch(self, args, kwargs, mode, grads=None, tape=None, checked=None):
        """`checked`: a _Checked tuple of ndarray arguments whose every access is
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
        if self._static_key is not None and mode == "primal" and checked is None:
            key = self._static_key          # scalar arguments only: the signature never varies
        else:
            # grad and dual instances depend on which fields have grads and duals
            key = [] if mode == "primal" else [mode, _ad_fields_version()]
            for pos, ((name, spec), a) in enumerate(zip(specs, args)):
                if spec is None:
                    key.append(_template_key(a))
                elif type(spec) is _NdarrayArg:
                    if arrays is None:
                        arrays = {}
                    info = ndarray_mod.array_info(spec.ann, a, self.name, name, spec.cache)
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
        if mode == "record":
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
                from fluxion.lang import kernel_cache
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

    def _compile(self, key, args, specs, mode="primal", build_only=False):
        from fluxion.frontend import calls
        from fluxion.ir.builder import BuildContext, building
        from fluxion.frontend.transformer import MatVar, Transformer, Var
        from fluxion.passes import pipeline
        runtime.ensure_initialized()
        cfg = runtime.config()
        calls._late_register()
        src = self.source()
        checked = key[-1] if key and type(key[-1]) is _Checked else ()
        arg_types = []
        ir = S.Kernel(self.name, arg_types, self._ret_types)
        if isinstance(self._ret_shape, ReturnSpec):
            ir.ret_spec = self._ret_shape
        ctx = BuildContext(ir, cfg)
        with building(ctx):
            ctx.loc = src.loc(src.tree)
            bound = {}
            slot = 0
            layout = []
            for (name, spec), a in zip(specs, args):
                if spec is None:
                    check = self._template_checks.get(name)
                    if check is not None:
                        check(a, self.name, name)
                    bound[name] = a
                    layout.append(None)
                elif isinstance(spec, _NdarrayArg):
                    from fluxion.frontend.access import ArrayValue
                    desc = key[len(layout) + (0 if mode == "primal" else 2)]
                    arg = ArrayArg(name, desc, slot)
                    arg.no_grad = getattr(spec.ann, "needs_grad", None) is False
                    arg.clamp = getattr(spec.ann, "boundary", None) == "clamp"
                    arg.checked = name in checked
                    arg.clamp = getattr(spec.ann, "boundary", None) == "clamp"
                    arg_types.extend([T.i64] * arg.nslots)
                    bound[name] = ArrayValue(arg)
                    layout.append((slot, arg))
                    slot += arg.nslots
                elif isinstance(spec, _StructArg):
                    from fluxion.ir.expr import Expr
                    from fluxion.frontend.transformer import StructVar
                    values = []
                    for _, dt in spec.leaves:
                        arg_types.append(dt)
                        values.append(Expr(builder.emit(S.ArgLoadStmt(slot, ret_type=dt))))
                        slot += 1
                    bound[name] = StructVar(_build_struct(spec.stype, iter(values)))
                    layout.append((slot - len(values), spec))
                elif isinstance(spec, _ScalarArg):
                    from fluxion.ir.expr import Expr
                    arg_types.append(spec.dtype)
                    v = Expr(builder.emit(S.ArgLoadStmt(slot, ret_type=spec.dtype)))
                    bound[name] = Var(spec.dtype, v)
                    layout.append((slot, spec))
                    slot += 1
                else:
                    from fluxion.ir.expr import Expr
                    entries = []
                    for _ in range(spec.count):
                        arg_types.append(spec.dtype)
                        entries.append(Expr(builder.emit(S.ArgLoadStmt(slot, ret_type=spec.dtype))))
                        slot += 1
                    mt = spec.mtype
                    bound[name] = MatVar(Matrix._make(entries, mt.n, mt.m, mt.ndim), spec.dtype)
                    layout.append((slot - spec.count, spec))
            for pname, ptype in self._packs:
                bound[pname] = build_pack_value(ptype, bound, pname)
            Transformer(src, self.globals(), self.name).build_function(bound)
        if mode in ("validate", "record"):
            from fluxion.autodiff import access_check, tape_log
            from fluxion.passes import dce
            dce.run(ir)   # the reads behind `x[i] = ...` targets are not reads of the program
            (access_check if mode == "validate" else tape_log).run(ir, cfg)
        if mode in ("grad", "grad_dual", "dual"):
            from fluxion.autodiff.reverse import reject_real_functions
            reject_real_functions(ir, mode)
        if mode in ("grad", "grad_dual"):
            from fluxion.autodiff import reverse, validate
            from fluxion.passes import dce
            dce.run(ir)
            validate.run(ir, cfg)
            ir = reverse.run(ir, cfg)
        if mode in ("dual", "grad_dual"):
            from fluxion.autodiff import forward
            from fluxion.passes import dce
            dce.run(ir)
            ir = forward.run(ir, cfg)
        from fluxion.lang import sparse
        sparse.instrument_writes(ir)   # after autodiff: its kernels' writes activate cells too
        pipeline.run(ir, cfg, cpu=not build_only and not runtime.on_cuda() and runtime.get_jit())
        for st in S.walk_all(ir):       # stores in the real functions it calls count too
            if isinstance(st, (S.GlobalStoreStmt, S.AtomicOpStmt)) and \
                    isinstance(st.ptr, S.ExternalPtrStmt) and not st.ptr.grad:
                st.ptr.arg.written = True
        if build_only:
            return ir
        compiled = runtime.get_jit().compile(ir)
        ret_types = () if mode in ("grad", "grad_dual") else self._ret_types
        inst = Instance(self, key, compiled, layout, ret_types, self._ret_shape)
        inst.tape_log_capacity = getattr(ir, "tape_log_capacity", 0)
        # the SNode trees whose fields it accesses: destroying one drops the instance
        inst.trees = {st.place.field._snode.tree for st in S.walk(ir.body)
                      if isinstance(st, S.GlobalPtrStmt)}
        inst.build_taint = ctx.taint
        inst.outer_reads = ctx.outer_reads
        return inst

    def ptx(self, *args, sm=90, **kwargs):
        """The PTX that the CUDA backend makes of this kernel for these arguments (works
        without a GPU; field addresses are placeholders there). Check it with ptxas."""
        from fluxion.codegen.cuda_jit import kernel_to_ptx
        self._check_generation()
        specs = self._arg_specs or self._specs()
        args = self._bind(args, kwargs, specs)
        key = ["ptx"]
        for pos, ((name, spec), a) in enumerate(zip(specs, args)):
            if spec is None:
                key.append(_template_key(a))
            elif type(spec) is _NdarrayArg:
                key.append(ndarray_mod.array_info(spec.ann, a, self.name, name, spec.cache)[0])
            else:
                key.append(spec.dtype)
        with runtime.compile_lock:
            ir = self._compile(tuple(key[1:]), args, specs, "primal", build_only=True)
        ptx, _ = kernel_to_ptx(ir, sm, runtime.config().fast_math,
                               address_of=lambda place: place.addr)
        return ptx

    def grad(self, *args, **kwargs):
        """Run the adjoint of this kernel: reads the grads of what it wrote, accumulates into
        the grads of what it read. Compiled once per template signature, like the primal."""
        torch = _modules.get("torch")
        if torch is not None and torch.compiler.is_compiling():
            return _eager_under_dynamo(torch)(Kernel.grad, self, args, kwargs)
        return self._launch(args, kwargs, "grad")


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


def _build_struct(stype, values):
    """A Struct of `stype` whose scalar members are taken from `values` in order."""
    from fluxion.lang.struct import Struct, StructType
    members = {}
    for k in stype.members:
        t = stype.member_type(k)
        if isinstance(t, StructType):
            members[k] = _build_struct(t, values)
        elif isinstance(t, MatrixType):
            members[k] = Matrix._make([next(values) for _ in range(t.n * t.m)], t.n, t.m, t.ndim)
        else:
            members[k] = next(values)
    return Struct(stype, members)


def _ad_fields_version():
    return _field_mod.ad_fields_version[0]


class ReturnSpec:
    """A kernel's return annotation made of structs or tuples: its items (DataType,
    MatrixType, StructType) and whether it is a tuple."""

    def __init__(self, items, is_tuple):
        self.items, self.is_tuple = items, is_tuple

    def rebuild(self, vals):
        """The Python value of the returned scalars `vals`: numbers, Matrix and Struct values,
        a tuple of them for a tuple annotation."""
        from fluxion.frontend.real_func import rebuild
        it = iter(vals)
        out = tuple(rebuild(a, it) for a in self.items)
        return out if self.is_tuple else out[0]


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
            from fluxion.ir.errors import FluxionSyntaxError
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


class Instance:
    """One compiled instance of a kernel: its machine code and how to pass its arguments."""

    def __init__(self, kernel, key, compiled, layout, ret_types, ret_shape):
        # one launch of an instance at a time: its arguments, returns and error code go
        # through one context buffer (launches from several Python threads take turns).
        # The launch in flight holds the token: popping and appending it are atomic under
        # the GIL and cost ~40 ns, where a threading.Lock costs 0.3-0.8 us (a system call
        # on some machines), a third of an empty kernel's launch.
        self._token = [True]
        st = runtime.state()
        self.generation = st.generation
        st.instances.add(self)
        st.compiled_count += 1
        self.kernel = kernel
        self.key = key
        self.compiled = compiled
        self.ret_types = ret_types
        self.ret_shape = ret_shape
        self._layout = layout       # per argument: None (template) or (slot, spec)
        # how the offline cache served this instance ("loaded", "compiled", "compiled, not
        # cached: <why>"), and its key there
        self.cache_note = None
        self.cache_key = None
        self._packers = []
        # host arrays passed to a CUDA kernel are copied in and out around each launch
        self._staging = getattr(compiled, "stages_host_arrays", False)
        for pos, entry in enumerate(layout):
            if entry is None:
                continue
            slot, spec = entry
            self._packers.append((pos, slot, spec))

    def __repr__(self):
        return f"<instance of {self.kernel.name} {self.key}>"

    def drop(self, why):
        """Remove this instance from its kernel's cache (the next call compiles anew); a
        launch of it kept elsewhere raises."""
        if self.kernel._instances.get(self.key) is self:
            del self.kernel._instances[self.key]
        self.compiled = _Dropped(self.compiled, self.kernel.name, why)

    def _pack_array(self, arg, a, info, ints, mode, keep, grad_override=None):
        desc, ptr, shape, strides, req, grad = info
        if grad_override is not None:
            grad = grad_override
        if req and ndarray_mod.unwrap(a)[0] == "torch":
            # (only made here; a grad launch finds it as it finds any tensor's .grad)
            g = ndarray_mod.ensure_torch_grad(a)
            if grad is None and not a.is_leaf:
                grad = g
        if req and arg.written and mode != "grad" and ndarray_mod.unwrap(a)[0] == "torch":
            # a tensor that requires grad, written in place (the original allows it: its
            # ndarray autodiff runs `k(x, y); k.grad(x, y)` on such tensors): torch does not
            # see the write, so its version counter moves on after the launch, and a torch
            # graph that saved the old values refuses to backpropagate instead of silently
            # using the new ones
            keep = [] if keep is None else keep
            keep.append(_TorchWrite(a))
        staging = self._staging and desc.device == "cpu"
        if staging:
            if strides is None:
                strides = ndarray_mod.row_major_strides(shape, desc.dtype.nbytes)
            ptr, keep = self._stage(ptr, shape, strides, desc, arg.written, keep)
        ints[arg.ptr_slot] = ptr
        if arg.reads_grad and mode not in ("grad", "grad_dual"):
            # the kernel's code reads or writes `arr.grad[...]`: only an existing gradient
            # array will do (a scratch one would silently give zeros)
            if strides is None:
                strides = ndarray_mod.row_major_strides(shape, desc.dtype.nbytes)
            gptr, keep, scratch = ndarray_mod.grad_pointer(a, grad, shape, strides, desc, keep)
            if scratch:
                raise FluxionArgumentError(
                    f"kernel '{self.kernel.name}' accesses '{arg.name}.grad', but the array "
                    f"passed for '{arg.name}' has no gradient (ti.ndarray(..., needs_grad=True), "
                    f"or a torch tensor with requires_grad=True)")
            if staging:
                gptr, keep = self._stage(gptr, shape, strides, desc, True, keep)
            ints[arg.grad_slot] = gptr
        if mode in ("grad", "grad_dual"):
            if strides is None:
                strides = ndarray_mod.row_major_strides(shape, desc.dtype.nbytes)
            gptr, keep, scratch = ndarray_mod.grad_pointer(a, grad, shape, strides, desc, keep)
            if staging:
                gptr, keep = self._stage(gptr, shape, strides, desc, True, keep)
            elif scratch and self._staging:
                # a device array without a gradient array: the scratch must be device memory
                gptr, keep = self._stage(gptr, shape, strides, desc, False, keep)
            ints[arg.grad_slot] = gptr
        s0 = arg.shape_slot
        for k, n in enumerate(shape):
            ints[s0 + k] = n
        if not desc.contiguous:
            t0 = arg.stride_slot
            for k, st in enumerate(strides):
                ints[t0 + k] = st
        return keep

    def _stage(self, ptr, shape, strides, desc, back, keep):
        """A device copy of host memory for this launch (CUDA): its pointer, and `keep` with
        the staging added, which the launch finishes."""
        st = ndarray_mod.HostStaging(self.compiled.jit.device, ptr, shape, strides,
                                     desc.dtype.nbytes, back)
        keep = [] if keep is None else keep
        keep.append(st)
        return st.device_pointer(ptr), keep

    def _arg_error(self, pos, spec, a, dtype=None):
        k = self.kernel
        name = k._arg_specs[pos][0]
        dtype = dtype or spec.dtype
        note = ""
        if dtype.is_int:
            lo, hi = _int_range(dtype)
            if isinstance(a, (float, np.floating)):
                note = (" (a float is never converted to an integer argument, whose value "
                        "it could change; pass an int: int(x), round(x))")
            else:
                try:
                    operator.index(a)
                    note = f" (out of range: {dtype} arguments take {lo} .. {hi})"
                except TypeError:
                    pass
        # a launch-time error, as in the original system (whose words come first)
        return FluxionRuntimeTypeError(k._where(
            f"Argument ({pos},) (type={type(a)}) cannot be converted into required type "
            f"{dtype}: kernel '{k.name}': argument '{name}' expects {dtype}, got "
            f"{type(a).__name__} {a!r}"[:400] + note))

    def _int_value(self, v, pos, spec, dtype):
        """The context slot value of integer argument `v` (see _int_slot_value), or raise."""
        bits = _int_slot_value(v, dtype)
        if bits is None:
            raise self._arg_error(pos, spec, v, dtype) from None
        return bits

    def _take_turn(self):
        """Wait for the launch of this instance in flight on another thread (rare), or
        raise if `ti.reset` retired the instance (it keeps the token)."""
        self._wait_for_token(check_stale=True)

    def retire(self):
        """Wait for the launch in flight, if any, and take the token for good: later launches
        raise (`ti.reset`, which has already published the new generation, calls this)."""
        try:
            self._token.pop()
        except IndexError:
            self._wait_for_token(check_stale=False)

    def _wait_for_token(self, check_stale):
        while True:
            if check_stale and self.generation != runtime._state.generation:
                raise self._stale()
            time.sleep(2e-5)
            try:
                self._token.pop()
                return
            except IndexError:
                pass

    def _stale(self):
        return FluxionRuntimeError(
            f"kernel '{self.kernel.name}' was launched while ti.reset() (or ti.init()) ran on "
            f"another thread, or after it: the fields and code of that launch are gone")

    def launch(self, args, arrays=None, mode="primal", grads=None):
        token = self._token
        try:
            token.pop()
        except IndexError:
            self._take_turn()
        try:
            c = self.compiled
            ints, floats = c.ctx_i, c.ctx_f
            keep = None
            for pos, slot, spec in self._packers:
                a = args[pos]
                if type(spec) is ArrayArg:
                    keep = self._pack_array(spec, a, arrays[pos], ints, mode, keep,
                                            grads.get(pos) if grads else None)
                elif isinstance(spec, _ScalarArg):
                    if spec.is_float:
                        try:
                            if isinstance(a, (str, bytes)):
                                raise TypeError  # numpy would parse "3" silently
                            floats[slot] = a
                        except (OverflowError, TypeError, ValueError):
                            raise self._arg_error(pos, spec, a) from None
                    elif type(a) is int and spec.lo <= a <= spec.hi:
                        ints[slot] = a      # the common case: a Python int in range
                    else:
                        ints[slot] = self._int_value(a, pos, spec, spec.dtype)
                elif type(spec) is _StructArg:
                    try:
                        vals = spec.flatten(a)
                    except (AttributeError, KeyError, IndexError, TypeError):
                        raise FluxionRuntimeTypeError(
                            f"Argument ({pos},) (type={type(a)}) cannot be converted into "
                            f"required type {spec.stype.name}: kernel '{self.kernel.name}': "
                            f"argument {pos} expects a {spec.stype.name}") from None
                    for k, ((_, dt), v) in enumerate(zip(spec.leaves, vals)):
                        if dt.is_float:
                            try:
                                floats[slot + k] = v
                            except (OverflowError, TypeError, ValueError):
                                raise self._arg_error(pos, spec, v, dt) from None
                        else:
                            ints[slot + k] = self._int_value(v, pos, spec, dt)
                else:
                    vals = a.entries if isinstance(a, Matrix) else list(np.ravel(a))
                    if len(vals) != spec.count:
                        raise FluxionRuntimeTypeError(
                            f"Argument ({pos},) (type={type(a)}) cannot be converted into "
                            f"required type {spec.mtype!r}: kernel '{self.kernel.name}': "
                            f"argument {pos} expects {spec.count} values, got {len(vals)}")
                    if spec.dtype.is_float:
                        for k, v in enumerate(vals):
                            try:
                                floats[slot + k] = v
                            except (OverflowError, TypeError, ValueError):
                                raise self._arg_error(pos, spec, v) from None
                    else:
                        for k, v in enumerate(vals):
                            ints[slot + k] = self._int_value(v, pos, spec, spec.dtype)
            if keep is None:
                c.run()
            else:
                # scratch gradient arrays live until the launch is over; host arrays staged for
                # a CUDA launch come back (and their device copies go) even if it fails
                try:
                    c.run()
                finally:
                    for k in keep:
                        if type(k) is ndarray_mod.HostStaging or type(k) is _TorchWrite:
                            k.finish()
                del keep
            if not self.ret_types:
                return None
            vals = c.read_returns()
            if self.ret_shape == "scalar":
                return vals[0]
            if isinstance(self.ret_shape, MatrixType):
                rs = self.ret_shape
                return Matrix._make(vals, rs.n, rs.m, rs.ndim)
            if isinstance(self.ret_shape, ReturnSpec):
                return self.ret_shape.rebuild(vals)
            return tuple(vals)
        finally:
            token.append(True)


class _Dropped:
    """Stands for the code of a dropped instance: launching it raises."""

    def __init__(self, compiled, name, why):
        self.ctx_i, self.ctx_f = compiled.ctx_i, compiled.ctx_f
        self.stages_host_arrays = getattr(compiled, "stages_host_arrays", False)
        self._name, self._why = name, why

    def run(self):
        raise FluxionRuntimeError(f"kernel '{self._name}': this compiled instance was dropped: "
                                  f"{self._why}; call the kernel again to compile it anew")


class _TorchWrite:
    """A tensor that requires grad and that a launch writes: afterwards its version counter
    moves on (torch checks it before using a saved tensor in a backward pass)."""
    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor

    def finish(self):
        from torch.autograd.graph import increment_version
        increment_version(self.tensor)


def kernel(fn=None, **_):
    if fn is None:
        return lambda f: kernel(f)
    k = Kernel(fn)
    k.check_annotations("kernel")
    return k
