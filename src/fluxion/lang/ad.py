"""`ti.ad`: the Tape, kernel gradients, custom gradients and gradient checking.

    with ti.ad.Tape(loss=loss):
        compute_loss()          # launches are recorded
    print(x.grad.to_numpy())    # on exit: loss.grad = 1, the grads run in reverse order
"""
from __future__ import annotations

import functools
import sys
import warnings

import numpy as np

from fluxion.autodiff import access_check
from fluxion.ir.modes import Mode
from fluxion.ir.errors import FluxionError, FluxionRuntimeError
from fluxion.lang import kernel as kernel_mod, runtime
from fluxion.lang.array_args import row_major_strides, unwrap
from fluxion.lang.field import Field, all_fields, placed_dual, placed_grad
from fluxion.lang.ndarray import ArrayArg, Ndarray, host_span
from fluxion.runtime import tape_log

_tape_stack = []
_bridge_depth = [0]


def in_torch_bridge():
    return _bridge_depth[0] > 0


_fwd_stack = []


def current_fwd():
    return _fwd_stack[-1] if _fwd_stack else None


def current_tape():
    return _tape_stack[-1] if _tape_stack and _tape_stack[-1].recording else None


def clear_all_gradients():
    """Zero the grad of every field."""
    for f in all_fields():
        if f._grad is not None and f._grad._snode is not None and f._snode is not None \
                and f._snode.tree.buffer is not None:
            f.grad.fill(0)


class Tape:
    """Record kernel launches and replay their gradients in reverse order on exit.

    `loss` must be a 0-D field with a grad. `clear_gradients` zeroes every grad on entry;
    `grad_check=[x, ...]` compares the computed gradients of those fields with central finite
    differences after the backward pass and raises if the worst relative error exceeds 1e-2
    (the fields must be float64 for a tight check).
    """

    def __init__(self, loss=None, clear_gradients=True, validation=False, grad_check=None):
        # (the messages begin with the original's words)
        if isinstance(loss, Ndarray):
            if loss.arr.size != 1:
                raise FluxionRuntimeError(f"The loss of `Tape` must be an ndarray with only "
                                          f"one element: this one has shape {loss.arr.shape}")
            if loss.grad is None:
                raise FluxionRuntimeError("Gradients of loss are not allocated, please set "
                                          "needs_grad=True for all ndarrays that are required "
                                          "by autodiff: the loss ndarray of a Tape needs them")
        elif _is_torch_tensor(loss):
            if loss.numel() != 1:
                raise FluxionRuntimeError(f"The loss of `Tape` must be a tensor only contains "
                                          f"one element: this one has shape "
                                          f"{tuple(loss.shape)}")
            if not loss.requires_grad:
                raise FluxionRuntimeError("Gradients of loss are not allocated, please set "
                                          "requires_grad=True for all tensors that are "
                                          "required by autodiff: the loss tensor of a Tape "
                                          "needs them")
        elif loss is not None:
            if not isinstance(loss, Field) or loss.shape != () or loss.n is not None:
                raise FluxionError("Tape(loss=...) needs a 0-D scalar field, e.g. "
                                   "ti.field(ti.f32, shape=(), needs_grad=True), or a "
                                   "one-element ndarray or torch tensor with a gradient")
            if placed_grad(loss) is None:
                raise FluxionError("the loss field of a Tape needs needs_grad=True (or "
                                   "ti.root.lazy_grad())")
        if grad_check and loss is not None and not isinstance(loss, Field):
            raise FluxionError("Tape(grad_check=...) needs a loss field")
        self.loss = loss
        self.clear_gradients = clear_gradients
        self.validation = validation
        self.grad_check = list(grad_check or [])
        self.entries = []           # (kind, callable, args, kwargs)
        self.recording = False
        self.gradient_evaluated = False
        self.saved_bytes = 0        # memory of the values saved to keep overwrites correct
        self._log = None
        self._touched = []          # (device, lo, hi) of the arrays recorded launches were passed

    def __enter__(self):
        if self.validation:
            if not runtime.config().debug:
                # the original system's words first: programs filter warnings by them
                warnings.warn("Debug mode is disabled, autodiff valid check will not work. "
                              "Please specify `ti.init(debug=True)` to enable the check. "
                              "(Tape(validation=True) checks the global data access rules only "
                              "with ti.init(debug=True); the Tape still logs overwritten "
                              "values)", stacklevel=2)
        if self.clear_gradients:
            clear_all_gradients()
        if self.loss is not None:
            _set_loss(self.loss, 0.0, grad=False)
        access_check.clear_masks(all_fields())
        self.recording = True
        _tape_stack.append(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.recording = False
        _tape_stack.pop()
        if exc_type is not None:
            return False
        if self.loss is not None:
            _set_loss(self.loss, 1.0, grad=True)
            self.grad()
            if self.grad_check:
                self.report = check_gradients(self, self.grad_check)
        return False

    def record(self, kernel, args, kwargs):
        self.entries.append(("kernel", kernel, args, kwargs))

    @property
    def calls(self):
        """The recorded kernel launches as (kernel, args), as the original's Tape lists them."""
        return [(k, a) for kind, k, a, _ in self.entries if kind == "kernel"]

    @property
    def modes(self):
        """Per recorded launch, the mode it ran in (the original's `Tape.modes`)."""
        return [Mode.VALIDATE if self.validation else Mode.PRIMAL] * len(self.calls)

    def launch_logged(self, inst, args, arrays):
        """Launch a recorded kernel with its overwrite log; keep what it logged, to restore
        before the gradients of the kernels recorded before it."""
        if self._log is None:
            self._log = tape_log.LogBuffer()
        c = inst.compiled
        snaps = self._array_snapshots(inst, args, arrays) if arrays else None
        self._log.prepare(c.ctx_i, c.layout.log, inst.tape_log_capacity)
        result = inst.launch(args, arrays, Mode.PRIMAL)
        log = self._log.take(inst.kernel.name)
        if log is not None:
            self.entries.insert(len(self.entries) - 1, ("restore", log, None, None))
            self.saved_bytes += sum(a.nbytes for a in log)
        if snaps:
            # only the elements the launch changed are kept
            snaps = [sn for sn in snaps if sn.keep_changed()]
        if snaps:
            self.entries.insert(len(self.entries) - 1, ("restore_arrays", snaps, None, None))
            self.saved_bytes += sum(sn.nbytes for sn in snaps)
        return result

    def _array_snapshots(self, inst, args, arrays):
        """Copies of the array arguments this launch writes that an earlier recorded launch
        read or wrote: the gradients of those earlier kernels must see the values they saw.
        (Fields are logged element by element, see tape_log.py; an array's elements have no
        read marks, so a written array is copied whole, and only when an earlier launch of
        this Tape was passed memory it overlaps.)"""
        snaps, spans = [], []
        for pos, _slot, spec in inst._packers:
            if type(spec) is not ArrayArg:
                continue
            desc, ptr, shape, strides, _req, _grad = arrays[pos]
            if strides is None:
                strides = row_major_strides(shape, desc.dtype.nbytes)
            lo, n = host_span(ptr, shape, strides, desc.dtype.nbytes)
            span = (desc.device, lo, lo + n)
            if n and spec.written and any(d == span[0] and a < span[2] and span[1] < b
                                          for d, a, b in self._touched):
                snaps.append(_ArraySnapshot(args[pos], inst.kernel.name, spec.name))
            spans.append(span)
        self._touched.extend(sp for sp in spans if sp[2] > sp[1])
        return snaps

    def record_custom(self, backward, args, kwargs):
        self.entries.append(("custom", backward, args, kwargs))

    def grad(self):
        if self.gradient_evaluated:
            raise FluxionError("the gradients of this Tape were already computed")
        self._backward()
        self.gradient_evaluated = True

    def _backward(self):
        """The recorded gradients, last first, with the overwritten values put back before the
        kernels recorded earlier run theirs; the fields and arrays end with the values the
        forward pass left."""
        redos = []
        for kind, fn, args, kwargs in reversed(self.entries):
            if kind == "kernel":
                fn.grad(*args, **kwargs)
            elif kind == "restore":
                redos.append((tape_log.redo, tape_log.restore(fn)))
            elif kind == "restore_arrays":
                for sn in fn:
                    sn.swap()
                redos.append((_swap_all, fn))
            else:
                fn(*args, **kwargs)
        for redo, what in reversed(redos):
            redo(what)

    def replay_forward(self):
        """Run the recorded computation again (used by finite-difference checks)."""
        for kind, fn, args, kwargs in self.entries:
            if kind == "kernel":
                fn._launch(args, kwargs, Mode.PRIMAL)
            elif kind == "custom":
                fn.forward(*args, **kwargs)


def _swap_all(snapshots):
    for sn in snapshots:
        sn.swap()


class _ArraySnapshot:
    """The old values of the elements of an array argument that a recorded launch changed.
    Taken whole before the launch and cut down after it to the elements whose bits changed
    (a kernel stepping through one big array keeps a step's worth). `swap` exchanges them with
    the array's current values: once to restore before the gradients of the kernels recorded
    earlier, once more to give back what the forward pass left."""

    def __init__(self, a, kernel_name, arg_name):
        self.kind, self.obj = unwrap(a)
        if self.kind == "numpy":
            self.data = self.obj.copy()
        elif self.kind == "torch":
            self.data = self.obj.detach().clone()
        else:
            raise FluxionError(
                f"kernel '{kernel_name}' overwrites argument '{arg_name}', which a kernel "
                f"recorded earlier by this Tape was passed; the Tape can keep the old values "
                f"of numpy arrays, torch tensors and ti.ndarrays only, not of "
                f"{type(a).__name__}, so the gradient would be wrong")
        self.where = None
        self.nbytes = 0

    def keep_changed(self):
        """Keep the old values of the elements whose bits the launch changed; False when
        there are none."""
        if self.kind == "numpy":
            bits = np.dtype(f"u{self.data.itemsize}")
            changed = self.data.view(bits) != self.obj.view(bits)
            # indices (a 0-D array takes its mask)
            self.where = np.nonzero(changed) if changed.ndim else changed
            self.data = self.data[self.where]
            n = int(self.data.size)
            self.nbytes = int(self.data.nbytes) + int(np.asarray(self.where).nbytes)
        else:
            import torch
            bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[
                self.data.element_size()]
            cur = self.obj.detach()
            changed = self.data.view(bits) != cur.view(bits)
            self.where = changed.nonzero(as_tuple=True) if changed.dim() else changed
            self.data = self.data[self.where]
            n = int(self.data.numel())
            w = self.where if isinstance(self.where, tuple) else (self.where,)
            self.nbytes = n * self.data.element_size() + sum(
                x.numel() * x.element_size() for x in w)
        return n > 0

    def swap(self):
        if self.kind == "numpy":
            cur = self.obj[self.where].copy()
            self.obj[self.where] = self.data
        else:
            import torch
            with torch.no_grad():
                t = self.obj.detach()
                cur = t[self.where].clone()
                t[self.where] = self.data
        self.data = cur


def _is_torch_tensor(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _set_loss(loss, value, grad):
    """Set a Tape's loss (a 0-D field, one-element ndarray or torch tensor), or its grad."""
    if isinstance(loss, Field):
        (loss.grad if grad else loss)[None] = value
    elif isinstance(loss, Ndarray):
        (loss.grad if grad else loss).fill(value)
    else:
        import torch
        with torch.no_grad():
            if not grad:
                loss.fill_(value)
            elif loss.grad is None:
                loss.grad = torch.full_like(loss, value)
            else:
                loss.grad.fill_(value)


def check_gradients(tape, fields, eps=None, samples=8, tol=1e-2):
    """Compare each field's grad with central differences of the tape's loss; return the worst
    relative error (and raise if it exceeds `tol`)."""
    loss = tape.loss
    worst = 0.0
    rng = np.random.default_rng(0)
    for f in fields:
        vals = f.to_numpy()
        grads = f.grad.to_numpy().reshape(-1)
        flat = vals.reshape(-1).astype(np.float64)
        h = eps or (1e-6 if f.dtype.bits == 64 else 1e-3) * max(1.0, float(np.abs(flat).max()))
        picks = rng.choice(flat.size, size=min(samples, flat.size), replace=False)
        for k in picks:
            def loss_at(v):
                p = flat.copy()
                p[k] = v
                f.from_numpy(p.reshape(vals.shape).astype(vals.dtype))
                loss[None] = 0
                tape.replay_forward()
                return loss[None]
            fd = (loss_at(flat[k] + h) - loss_at(flat[k] - h)) / (2 * h)
            err = abs(fd - grads[k]) / max(abs(fd), abs(grads[k]), 1e-8)
            worst = max(worst, err)
        f.from_numpy(vals)
    loss[None] = 0
    tape.replay_forward()
    if worst > tol:
        raise FluxionError(f"grad_check: the gradient differs from finite differences by a "
                           f"relative error of {worst:.3g}")
    print(f"[fluxion] grad_check passed: worst relative error {worst:.3g}")
    return worst


def _no_gradient(*args, **kwargs):
    return None


def no_grad(fn):
    """Give a kernel, or a Python function that launches kernels, an empty gradient: a Tape
    records none of the launches it makes, and its `.grad(...)` does nothing."""
    if isinstance(fn, kernel_mod.Kernel):
        fn.no_grad = True
        fn.grad = _no_gradient
        return fn

    @functools.wraps(fn)
    def decorated(*args, **kwargs):
        tape = current_tape()
        if tape is None:
            return fn(*args, **kwargs)
        tape.recording = False
        try:
            return fn(*args, **kwargs)
        finally:
            tape.recording = True

    decorated.grad = _no_gradient
    return decorated


class _GradReplaced:
    def __init__(self, forward):
        functools.update_wrapper(self, forward)
        self.forward = forward
        self.backward = None

    def __call__(self, *args, **kwargs):
        tape = current_tape()
        if tape is None:
            return self.forward(*args, **kwargs)
        if self.backward is None:
            raise FluxionError(f"{self.forward.__name__} is @ti.ad.grad_replaced but no "
                               f"@ti.ad.grad_for({self.forward.__name__}) was defined")
        tape.entries.append(("custom", _Custom(self), args, kwargs))
        # the kernels it launches are not recorded: its backward replaces them
        tape.recording = False
        try:
            return self.forward(*args, **kwargs)
        finally:
            tape.recording = True

    def grad(self, *args, **kwargs):
        return self.backward(*args, **kwargs)

    def __get__(self, obj, owner=None):
        # a method of a (@ti.data_oriented) class: bound to the instance like a function
        if obj is None:
            return self
        return _BoundGradReplaced(self, obj)


class _BoundGradReplaced:
    def __init__(self, replaced, obj):
        self.replaced, self.obj = replaced, obj

    def __call__(self, *args, **kwargs):
        return self.replaced(self.obj, *args, **kwargs)

    def grad(self, *args, **kwargs):
        return self.replaced.grad(self.obj, *args, **kwargs)


class _Custom:
    def __init__(self, replaced):
        self.replaced = replaced

    def __call__(self, *args, **kwargs):
        return self.replaced.backward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self.replaced.forward(*args, **kwargs)


def grad_replaced(forward):
    """Decorate a Python function whose gradient is given by a `@grad_for` function."""
    return _GradReplaced(forward)


class GradForError(FluxionError, RuntimeError):
    """`@ti.ad.grad_for` misused (also a RuntimeError, as in the original system)."""


def grad_for(primal):
    """Register the decorated function as the backward of a `@grad_replaced` function."""
    if not isinstance(primal, _GradReplaced):
        raise GradForError(f"@ti.ad.grad_for(f) needs f to be decorated with "
                           f"@ti.ad.grad_replaced; {getattr(primal, '__name__', primal)!r} is not")

    def deco(backward):
        primal.backward = backward
        return backward
    return deco


class FwdMode:
    """Forward-mode autodiff: inside the block, kernels run their dual instance, computing
    values and tangents together. `param.dual` is set from `seed` (the direction of the
    Jacobian-vector product; required unless `param` is 0-D) and the duals of `loss` (a field
    or a list of fields) are cleared on entry.

        with ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 0.0]):
            compute_y()
        print(y.dual.to_numpy())      # dy/dx_0
    """

    def __init__(self, loss, param, seed=None, clear_gradients=True):
        self.losses = list(loss) if isinstance(loss, (list, tuple)) else [loss]
        if not isinstance(param, Field):
            raise FluxionError("FwdMode(param=...) needs a field")
        for f in self.losses + [param]:
            if placed_dual(f) is None:
                raise FluxionError(f"field {f._label()} needs needs_dual=True (or "
                                   f"ti.root.lazy_dual()) for forward mode")
        size = int(np.prod(param.shape + param._element_shape())) if param.shape or \
            param._element_shape() else 1
        if seed is None:
            if size != 1:
                raise FluxionError(f"FwdMode: param has {size} values, so a seed (the tangent "
                                   f"direction, {size} numbers) is required")
            seed = [1.0]
        seed = np.asarray(seed, dtype=np.float64).reshape(-1)
        if seed.size != size:
            raise FluxionError(f"FwdMode: the seed has {seed.size} values but param has {size}")
        self.param = param
        self.seed = seed
        self.clear_gradients = clear_gradients
        self.entries = None    # a list when the launches are recorded (hvp)

    def __enter__(self):
        if self.clear_gradients:
            for f in self.losses:
                f.dual.fill(0)
        p = self.param
        p.dual.from_numpy(self.seed.reshape(p.shape + p._element_shape()).astype(
            p.dual.dtype.np_dtype))
        _fwd_stack.append(self)
        return self

    def __exit__(self, *exc):
        _fwd_stack.pop()
        self.param.dual.fill(0)
        return False


def _all_ad_fields():
    return [f for f in all_fields() if placed_grad(f) is not None and not f.is_grad and
            f._snode is not None]


def hvp(fn, loss, param, v, *args):
    """Hessian-vector product of a scalar `loss` w.r.t. field `param`, along `v`, by
    forward-over-reverse: one forward pass with tangents, then the grad kernels in their dual
    form. Costs about one gradient evaluation. Returns (gradient, H v) as numpy arrays.

    `fn(*args)` launches the kernels that compute `loss` (a 0-D field) from `param`; every
    field on the way needs a grad (needs_grad=True or ti.root.lazy_grad()).
    """
    for f in _all_ad_fields():
        f._create_dual()           # (places it if needed)
        f.grad._create_dual()
    clear_all_gradients()
    for f in _all_ad_fields():
        f.dual.fill(0)
        f.grad.dual.fill(0)
    loss[None] = 0
    fwd = FwdMode(loss=[loss], param=param, seed=np.asarray(v).reshape(-1))
    fwd.entries = []
    with fwd:
        fn(*args)
        loss.grad[None] = 1
        loss.grad.dual[None] = 0
        _fwd_stack.pop()   # the grads run outside forward mode, as their dual instances
        try:
            for kernel, kargs, kwargs in reversed(fwd.entries):
                kernel._launch(kargs, kwargs, Mode.GRAD_DUAL)
        finally:
            _fwd_stack.append(fwd)
    return param.grad.to_numpy(), param.grad.dual.to_numpy()


def jacobian(fn, outputs, param, *args):
    """The Jacobian d outputs / d param as a (outputs.size, param.size) numpy array, filled
    column by column in forward mode or row by row in reverse mode, whichever needs fewer
    passes. `fn(*args)` launches the kernels computing `outputs` from `param`."""
    n_out = int(np.prod(outputs.shape + outputs._element_shape()))
    n_in = int(np.prod(param.shape + param._element_shape()))
    J = np.zeros((n_out, n_in))
    if n_in <= n_out:
        for f in (outputs, param):
            if placed_dual(f) is None:
                raise FluxionError(f"jacobian: field {f._label()} needs needs_dual=True")
        for j in range(n_in):
            seed = np.zeros(n_in)
            seed[j] = 1.0
            with FwdMode(loss=outputs, param=param, seed=seed):
                fn(*args)
            J[:, j] = outputs.dual.to_numpy().reshape(-1)
        return J
    tape = Tape(loss=None, clear_gradients=True)
    with tape:
        fn(*args)
    shape = outputs.shape + outputs._element_shape()
    for i in range(n_out):
        clear_all_gradients()
        e = np.zeros(n_out)
        e[i] = 1.0
        outputs.grad.from_numpy(e.reshape(shape).astype(outputs.grad.dtype.np_dtype))
        tape._backward()
        J[i] = param.grad.to_numpy().reshape(-1)
    return J
