"""Kernels as differentiable PyTorch operations.

    @ti.kernel
    def scale(x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[i] = x[i] ** 2

    square = ti.ad.torch_function(scale, outputs={"y": lambda x: torch.empty_like(x)})
    y = square(x)            # forward: the kernel; backward: its grad instance
    y.sum().backward()

The output arguments are left out of the operation's signature: each is made by its factory
from the other arguments. Under the hood this is a `torch.autograd.Function`, so the
operation can sit in an `nn.Module`, pass `torch.autograd.gradcheck` and run under
`torch.compile` (as a graph break).

The operation is hidden from TorchDynamo (`torch.compiler.disable`): a compiled model
breaks its graph there and runs the operation eagerly. Dynamo must not trace the launch
code: it would turn the data pointers and shapes it reads from the tensors into constants
of a compiled frame, and a later call would pass a stale pointer to the kernel.
"""
from __future__ import annotations

import inspect

from fluxion.ir.modes import Mode
from fluxion.lang import ad
from fluxion.ir.errors import FluxionOutOfBoundsError, FluxionTypeError
from fluxion.lang.array_args import same_layout
from fluxion.lang.kernel import _Checked


def _memory(t):
    """The byte range [lo, hi) that the elements of tensor `t` lie in."""
    if t.numel() == 0:
        return 0, 0
    lo = hi = t.data_ptr()
    for n, st in zip(t.shape, t.stride()):
        reach = (n - 1) * st * t.element_size()
        if reach < 0:
            lo += reach
        else:
            hi += reach
    return lo, hi + t.element_size()


def _check_outputs(kernel, in_names, inputs, outs):
    """Each output a fresh tensor: one sharing memory with an input (or another output) is
    overwritten by the forward kernel while the backward one still needs the old values,
    and its gradient would be wrong."""
    import torch
    named = [(f"input '{n}'", x) for n, x in zip(in_names, inputs)
             if isinstance(x, torch.Tensor)]
    for name, o in outs.items():
        if not isinstance(o, torch.Tensor):
            raise FluxionTypeError(f"torch_function({kernel.name}): the factory of output "
                                   f"'{name}' returned {type(o).__name__}, not a torch tensor")
        lo, hi = _memory(o)
        for other, x in named:
            xlo, xhi = _memory(x)
            if lo < xhi and xlo < hi:
                raise FluxionTypeError(
                    f"torch_function({kernel.name}): output '{name}' shares memory with "
                    f"{other}; its factory must return a new tensor (e.g. torch.empty_like), "
                    f"or the gradients would be computed from overwritten values")
        named.append((f"output '{name}'", o))


def _is_compiling(torch):
    compiler = getattr(torch, "compiler", None)
    return compiler is not None and hasattr(compiler, "disable") and compiler.is_compiling()


def torch_function(kernel, outputs):
    import torch

    params = list(kernel.params())
    for name in outputs:
        if name not in params:
            raise FluxionTypeError(f"torch_function: kernel '{kernel.name}' has no argument "
                                   f"'{name}'")
    in_names = [p for p in params if p not in outputs]
    checked = _Checked(sorted(outputs))

    def assemble(inputs, outs):
        args = [None] * len(params)
        it = iter(inputs)
        for k, name in enumerate(params):
            args[k] = outs[name] if name in outs else next(it)
        return args

    class _Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            outs = {name: make(*inputs) for name, make in outputs.items()}
            _check_outputs(kernel, in_names, inputs, outs)
            args = assemble(inputs, outs)
            ad._bridge_depth[0] += 1
            try:
                # the outputs' accesses are bound-checked: their shapes come from the
                # factories, and a too small one would be written past its end
                kernel._launch(tuple(args), {}, Mode.PRIMAL, checked=checked)
            except FluxionOutOfBoundsError as e:
                shapes = ", ".join(f"'{n}' {tuple(o.shape)}" for n, o in outs.items())
                raise FluxionOutOfBoundsError(
                    f"torch_function({kernel.name}): an output made by its factory is smaller "
                    f"than the kernel writes (outputs: {shapes}):\n{e}") from None
            finally:
                ad._bridge_depth[0] -= 1
            tensors = [x if isinstance(x, torch.Tensor) else None for x in inputs]
            ctx.save_for_backward(*[t for t in tensors if t is not None])
            ctx.tensor_slots = [t is not None for t in tensors]
            ctx.others = [None if isinstance(x, torch.Tensor) else x for x in inputs]
            ctx.outs = outs
            res = tuple(outs[n] for n in outputs)
            return res[0] if len(res) == 1 else res

        @staticmethod
        def backward(ctx, *grad_outs):
            saved = iter(ctx.saved_tensors)
            inputs = [next(saved) if is_t else other
                      for is_t, other in zip(ctx.tensor_slots, ctx.others)]
            args = assemble(inputs, ctx.outs)
            grads = {}
            in_grads = []
            for k, name in enumerate(params):
                a = args[k]
                if name in outputs:
                    g = grad_outs[list(outputs).index(name)]
                    # a copy: the grad kernel zeroes the gradients of the elements the
                    # kernel stored, and torch's tensor may be used elsewhere
                    g = torch.zeros_like(a) if g is None else g.clone(
                        memory_format=torch.contiguous_format)
                    if not same_layout(a.shape, g.stride(), a.stride()):
                        g = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype,
                                                device=a.device).copy_(g)
                    grads[k] = g
                elif isinstance(a, torch.Tensor):
                    wants = a.requires_grad or ctx.needs_input_grad[len(in_grads)]
                    g = torch.zeros_like(a)   # keeps the strides of a dense input
                    if not same_layout(a.shape, g.stride(), a.stride()):
                        # a non-dense view (x[::2], expand): the grad kernel addresses the
                        # gradient with the input's strides, so it runs on a dense copy
                        a = args[k] = a.contiguous()
                        g = torch.zeros_like(a)
                    grads[k] = g
                    in_grads.append(g if wants else None)
                else:
                    in_grads.append(None)
            ad._bridge_depth[0] += 1
            try:
                kernel._launch(tuple(args), {}, Mode.GRAD, grads=grads)
            finally:
                ad._bridge_depth[0] -= 1
            return tuple(in_grads)

    # hidden from TorchDynamo only while it traces: `torch.compiler.disable` imports
    # torch._dynamo, which takes seconds, so the hidden version is made on first need
    hidden = []

    def op(*inputs):
        if len(inputs) != len(in_names):
            raise FluxionTypeError(f"{kernel.name}: expected inputs ({', '.join(in_names)}), "
                                   f"got {len(inputs)} values")
        if _is_compiling(torch):
            if not hidden:
                hidden.append(torch.compiler.disable(_Fn.apply))
            return hidden[0](*inputs)
        return _Fn.apply(*inputs)

    op.__name__ = kernel.name
    op.__doc__ = f"Differentiable torch operation running kernel '{kernel.name}'."
    op.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in in_names])
    return op
