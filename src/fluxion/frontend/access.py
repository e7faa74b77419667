"""Field element access inside kernels: `x[i, j]` -> GlobalPtr + GlobalLoad per component.

Each loaded value remembers its pointer (`Expr.lvalue`), so `x[i] = v`, `x[i] += v` and
`ti.atomic_add(x[i], v)` store through it and the unused load is removed by dead code
elimination.
"""
from __future__ import annotations

from fluxion.ir import builder
from fluxion.ir import expr as E
from fluxion.ir import stmts as S
from fluxion.ir import types as T
from fluxion.ir.builder import emit
from fluxion.ir.errors import FluxionCompilationError, FluxionIndexError, FluxionTypeError
from fluxion.ir.expr import Expr
from fluxion.frontend.builtins import max as kmax, min as kmin
from fluxion.frontend.matrix import Matrix, MatrixType
from fluxion.frontend.places import StructFieldBase, sparse
from fluxion.frontend.struct import Struct


def _name(field, label):
    return f"'{field.name}'" if field.name else (f"'{label}'" if label else field._label())


def flatten_index(index):
    """`x[None]`, `x[i]`, `x[i, j]`, `x[I]` (a vector of indices): the list of scalars."""
    if index is None:
        index = ()
    elif isinstance(index, Matrix):
        index = tuple(index.entries)
    elif not isinstance(index, tuple):
        index = (index,)
    flat = []
    for k in index:
        flat.extend(k.entries if isinstance(k, Matrix) else [k])
    return flat


def as_indices(flat, what):
    """Kernel values of the default integer type; floats are an error naming `what`."""
    ip = builder.current().cfg.default_ip
    out = []
    for pos, k in enumerate(flat):
        if isinstance(k, float) or (isinstance(k, Expr) and k.dtype.is_float):
            t = k.dtype if isinstance(k, Expr) else "float"
            raise FluxionTypeError(f"{what} indexed with a float: indices must be integers, "
                                   f"however '{t}' is provided as index {pos}")
        out.append(E.cast(E.to_expr(k, like=ip), ip) if isinstance(k, Expr) else E.const(k, ip))
    return out


def normalize_index(field, index, label=None):
    flat = flatten_index(index)
    shape = field.shape
    if len(flat) != len(shape):
        raise FluxionIndexError(
            f"field {_name(field, label)} has {len(shape)} dimensions but is indexed with {len(flat)} "
            f"indices" + (" (use x[None] for a 0-D field)" if not shape else ""))
    return as_indices(flat, f"field {_name(field, label)}")


def _list_cell(field, index, label):
    """`x[i]` of a field under a dynamic node, without the list's index: the list (see
    lang/sparse_list_cells.py); None for any other index."""
    flat = flatten_index(index)
    if len(flat) != len(field.shape) - 1:
        return None
    if not any(s.kind == "dynamic" for s in sparse.levels(sparse.node_of(field))):
        return None
    return sparse.list_cell(field, as_indices(flat, f"field {_name(field, label)}"))


def field_access(field, index, label=None):
    if field._snode is None:
        twin = field._twin_of
        if twin is not None:
            name = f"{label or twin[0].name or 'x'}"
            name = name if name.endswith("." + twin[1]) else name + "." + twin[1]
            raise FluxionCompilationError(
                f"{'Gradient' if twin[1] == 'grad' else 'Dual'} {name} has not been placed, "
                f"check whether `needs_{twin[1]}=True` (the field needs needs_{twin[1]}=True "
                f"with shape=, or ti.root.lazy_{twin[1]}())")
        raise FluxionCompilationError(f"field {_name(field, label)} is used in a kernel but "
                                      f"has not been placed: give it a shape or place it")
    field._materialize()
    cell = _list_cell(field, index, label)
    if cell is not None:
        return cell
    idx = normalize_index(field, index, label)
    ctx = builder.current()
    if _check_accesses(ctx.cfg):
        _bounds_check(field, idx, label)
    loads = []
    for place in field.places:
        if place.quant is not None:
            # a bit field of a word (lang/quant.py); the load decodes it to the compute type
            ptr = emit(S.QuantPtrStmt([i.stmt for i in idx], place, ret_type=T.i64))
        else:
            ptr = emit(S.GlobalPtrStmt([i.stmt for i in idx], place, ret_type=place.dtype))
        loads.append(Expr(emit(S.GlobalLoadStmt(ptr, ret_type=place.dtype)), lvalue=ptr))
    if field.n is None:
        return loads[0]
    return Matrix._make(loads, field.n, field.m, field.ndim)


def _check_accesses(cfg):
    """Bounds checks of field and ndarray accesses (runtime/program.py: check_accesses)."""
    return getattr(cfg, "check_accesses", cfg.check_out_of_bound)


def _bounds_check(field, idx, label):
    ctx = builder.current()
    shape = field.shape
    off = field.offset or (0,) * len(shape)
    conds = None
    for k, (i, n, o) in enumerate(zip(idx, shape, off)):
        c = E.truth((i >= o) & (i < o + n))
        conds = c if conds is None else conds & c
    if conds is None or E.const_of(conds.stmt) == 1:
        return
    code = len(ctx.ir.errors)
    ctx.ir.errors.append((f"Out of bound access: index {{}} out of bounds for field "
                          f"{_name(field, label)} of shape {shape}"
                          + (f" and offset {off}" if field.offset else ""), ctx.loc, len(idx)))
    emit(S.AssertStmt(conds.stmt, [i.stmt for i in idx], code))


def matrix_bounds_check(mat, key):
    """With bounds checks on (debug or check_out_of_bound), a kernel-value index into a
    local vector or matrix that is past its shape fails as a field's does (without them the
    select chain reads the nearest entry and a store to it stores nothing)."""
    ctx = builder.current()
    if not ctx.cfg.check_out_of_bound:
        return
    key = tuple(key.entries) if isinstance(key, Matrix) else \
        key if isinstance(key, tuple) else (key,)
    idx, conds = [], None
    for k, n in zip(key, (mat.n, mat.m)):
        if not isinstance(k, Expr):
            continue      # a constant index or a slice is checked while compiling
        idx.append(k)
        c = E.truth((k >= 0) & (k < n))
        conds = c if conds is None else conds & c
    if conds is None or E.const_of(conds.stmt) == 1:
        return
    code = len(ctx.ir.errors)
    what = f"vector of shape ({mat.n},)" if mat.ndim == 1 else \
        f"matrix of shape ({mat.n}, {mat.m})"
    ctx.ir.errors.append((f"Out of bound access: index {{}} out of bounds for a local {what}",
                          ctx.loc, len(idx)))
    emit(S.AssertStmt(conds.stmt, [E.cast(i, T.i64).stmt for i in idx], code))


class NdarrayType:
    """The annotation `ti.types.ndarray(dtype=None, ndim=None)`."""

    def __init__(self, dtype=None, ndim=None, needs_grad=None, boundary=None, element_dim=None,
                 **_):
        self.ndim = ndim
        self.element = None
        self.dtype = None
        # needs_grad=False: reverse mode gives this argument no gradient
        self.needs_grad = needs_grad
        if isinstance(dtype, MatrixType):
            self.element = dtype
        elif element_dim:
            # the original's older form (difftaichi's programs): the last 1 or 2 dimensions
            # of the array are a vector or matrix element, of the size the array has
            if element_dim not in (1, 2):
                raise ValueError(f"ti.types.ndarray(element_dim={element_dim!r}): 0, 1 "
                                 f"(vectors) or 2 (matrices)")
            self.element = MatrixType(None, None, element_dim,
                                      None if dtype is None else T.normalize(dtype))
        elif dtype is not None:
            self.dtype = T.normalize(dtype)
        # element dimensions trailing the array's own (a plain attribute: read every launch)
        self.n_element_dims = 0 if self.element is None else self.element.ndim
        # "clamp": out-of-range indices read/write the nearest element; "unsafe": unchecked
        if boundary not in (None, "unsafe", "clamp"):
            raise ValueError(f"ti.types.ndarray(boundary={boundary!r}): boundary is 'unsafe' "
                             f"or 'clamp'")
        self.boundary = boundary or "unsafe"

    def element_shape(self):
        if self.element is None:
            return ()
        e = self.element
        return (e.n,) if e.ndim == 1 else (e.n, e.m)

    def scalar_dtype(self):
        if self.element is not None:
            if self.element.n is None and self.element._dtype is None:
                return None      # ti.types.vector() / matrix(): any element type
            return self.element.dtype
        return self.dtype


class ArrayValue:
    """An ndarray argument inside a kernel: `arr[i, j]`, `arr.shape[k]`, `for i, j in arr`."""

    def __init__(self, arg, is_grad=False):
        self.arg = arg
        self.is_grad = is_grad
        self._shape = None

    @property
    def grad(self):
        """`arr.grad[i]`: the argument's gradient array, read or written like the array (the
        launch passes its pointer; a kernel that does this cannot itself be differentiated)."""
        if self.is_grad:
            raise FluxionIndexError(f"ndarray argument '{self.arg.name}': a gradient array has "
                                    f"no gradient of its own")
        self.arg.reads_grad = True
        return ArrayValue(self.arg, is_grad=True)

    @property
    def shape(self):
        if self._shape is None:
            # read once, at the top of the kernel's body: the values are kept for every later
            # use, which may lie outside the block of the first (a bounds check inside a loop,
            # then one after it), and a read at the top dominates them all
            ctx = builder.current()
            ip = ctx.cfg.default_ip
            top = ctx.blocks[0]
            dims = []
            for k in range(self.arg.desc.ndim):
                st = S.ArgLoadStmt(self.arg.shape_slot + k, ret_type=ip, loc=ctx.loc)
                st.parent = top
                top.stmts.insert(k, st)
                dims.append(Expr(st))
            self._shape = tuple(dims)
        return self._shape

    @property
    def dtype(self):
        return self.arg.desc.dtype

    def element_shape(self):
        """The shape of one element ([] for scalars, [3] for 3-vectors): a list, as in the
        original system, so `ti.static(a.element_shape() == [3])` selects code per array."""
        return list(self.arg.desc.elem_shape)

    def bounds(self):
        return [(0, n) for n in self.shape]


def ndarray_access(av, index, label=None):
    arg = av.arg
    d = arg.desc
    flat = flatten_index(index)
    if len(flat) != d.ndim:
        raise FluxionIndexError(f"ndarray argument '{arg.name}' has {d.ndim} dimensions but is "
                                f"indexed with {len(flat)} indices")
    idx = as_indices(flat, f"ndarray argument '{arg.name}'")
    ctx = builder.current()
    if arg.clamp:
        # boundary="clamp": each index is moved into [0, n); the annotation was ignored and
        # an out-of-range index read memory outside the array
        idx = [kmax(kmin(i, n - 1), 0) for i, n in zip(idx, av.shape)]
    if _check_accesses(ctx.cfg) or arg.checked:
        conds = None
        for i, n in zip(idx, av.shape):
            c = E.truth((i >= 0) & (i < n))
            conds = c if conds is None else conds & c
        if conds is not None:
            code = len(ctx.ir.errors)
            ctx.ir.errors.append((f"Out of bound access: index {{}} out of bounds for ndarray "
                                  f"argument '{arg.name}'",
                                  ctx.loc, len(idx)))
            emit(S.AssertStmt(conds.stmt, [i.stmt for i in idx], code))
    n_comp = 1
    for e in d.elem_shape:
        n_comp *= e
    loads = []
    for c in range(n_comp):
        ptr = emit(S.ExternalPtrStmt([i.stmt for i in idx], arg, c, av.is_grad,
                                     ret_type=d.dtype))
        loads.append(Expr(emit(S.GlobalLoadStmt(ptr, ret_type=d.dtype)), lvalue=ptr))
    if not d.elem_shape:
        return loads[0]
    es = d.elem_shape
    if len(es) == 1:
        out = Matrix._make(loads, es[0], 1, 1)
    else:
        out = Matrix._make(loads, es[0], es[1], 2)
    return out


def struct_access(sf, index, label=None):
    """`s[i]` on a struct field: a Struct of the members' element accesses."""
    cell = _list_cell(sf, index, label)
    if cell is not None:
        return cell
    members = {}
    for k, f in sf.fields.items():
        sub = f"{label}.{k}" if label else k
        members[k] = struct_access(f, index, sub) if isinstance(f, StructFieldBase) else \
            field_access(f, index, sub)
    return Struct(sf.stype, members)
