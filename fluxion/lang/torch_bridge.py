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

from fluxion.lang import ad
from fluxion.lang.exceptions import FluxionTypeError
from fluxion.lang.ndarray import same_layout


def torch_function(kernel, outputs):
    import torch

    params = list(kernel.params())
    for name in outputs:
        if name not in params:
            raise FluxionTypeError(f"torch_function: kernel '{kernel.name}' has no argument "
                                   f"'{name}'")
    in_names = [p for p in params if p not in outputs]
    [params.index(n) for n in outputs]

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
            args = assemble(inputs, outs)
            ad._bridge_depth[0] += 1
            try:
                kernel._launch(tuple(args), {}, "primal")
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
                    g = torch.zeros_like(a) if g is None else g.contiguous()
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
                kernel._launch(tuple(args), {}, "grad", grads=grads)
            finally:
                ad._bridge_depth[0] -= 1
            return tuple(in_grads)

    apply = _Fn.apply
    if hasattr(torch, "compiler") and hasattr(torch.compiler, "disable"):
        apply = torch.compiler.disable(apply)

    def op(*inputs):
        if len(inputs) != len(in_names):
            raise FluxionTypeError(f"{kernel.name}: expected inputs ({', '.join(in_names)}), "
                                   f"got {len(inputs)} values")
        return apply(*inputs)

    op.__name__ = kernel.name
    op.__doc__ = f"Differentiable torch operation running kernel '{kernel.name}'."
    op.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in in_names])
    return op
