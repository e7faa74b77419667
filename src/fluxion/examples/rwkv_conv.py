"""The RWKV depthwise 1-D convolution as a fluxion kernel, forward and backward, against
PyTorch's `F.conv1d`.

out[b, c, t] = eps + sum over u of w[c, 0, (T-1)-(t-u)] * k[b, c, u+T-1], for u in
(t-T, t], with k padded on the left by T-1 zeros: the seed's `taichi_forward_v0`, written as
the naive loop. Its backward comes from fluxion's reverse mode (`ti.ad.torch_function`), and
both are compared with `eps + F.conv1d(ZeroPad2d((T-1, 0, 0, 0))(k), w.unsqueeze(1), groups=C)`.

Variants (`--variant`): v0, the seed's naive kernel; v1, four outputs per iteration sharing
each loaded tap (on the CPU fluxion already fuses v0's loops this way: both run at about the
same speed); v2, shared memory per block (`ti.simt.block`, CUDA only), whose backward is
written by hand (make_backward_v2) instead of derived.

    python -m fluxion.examples rwkv_conv [--B 8] [--C 256] [--T 768] [--variant v0]
                                         [--arch cpu]
"""
import argparse
import time

import fluxion as ti
from fluxion.examples import _arch


def make_forward(T):
    @ti.kernel
    def taichi_forward_v0(out: ti.types.ndarray(ndim=3), w: ti.types.ndarray(ndim=3),
                          k: ti.types.ndarray(ndim=3), eps: ti.f32):
        for b, c, t in out:
            s = eps
            for u in range(t - T + 1, t + 1):
                s += w[c, 0, (T - 1) - (t - u)] * k[b, c, u + T - 1]
            out[b, c, t] = s

    return taichi_forward_v0


def make_forward_v1(T):
    """Four outputs per iteration (t .. t+3 share every loaded tap w[c, 0, j]); T % 4 == 0.
    With j = (T-1) - (t-u), out[b, c, t] = eps + sum_j w[c, 0, j] * k[b, c, t + j]."""
    assert T % 4 == 0

    @ti.kernel
    def forward_v1(out: ti.types.ndarray(ndim=3), w: ti.types.ndarray(ndim=3),
                   k: ti.types.ndarray(ndim=3), eps: ti.f32):
        for b, c, q in ti.ndrange(out.shape[0], out.shape[1], T // 4):
            t = q * 4
            s = ti.Vector([eps, eps, eps, eps])
            for j in range(T):
                wj = w[c, 0, j]
                s += wj * ti.Vector([k[b, c, t + j], k[b, c, t + j + 1], k[b, c, t + j + 2],
                                     k[b, c, t + j + 3]])
            for m in ti.static(range(4)):
                out[b, c, t + m] = s[m]

    return forward_v1


def make_forward_v2(T):
    """GPU only (ti.simt.block): one block per (b, c) row and one thread per t. The block
    stages the row's taps and its window of k in shared memory once; every thread then reads
    its products from there instead of from global memory, and only the t + 1 of them whose
    k is not padding (the seed's CUDA kernel does the same triangular sum)."""
    @ti.kernel
    def forward_v2(out: ti.types.ndarray(ndim=3), w: ti.types.ndarray(ndim=3),
                   k: ti.types.ndarray(ndim=3), eps: ti.f32):
        ti.loop_config(block_dim=T)
        for i in range(out.shape[0] * out.shape[1] * T):
            ws = ti.simt.block.SharedArray((T,), ti.f32)
            ks = ti.simt.block.SharedArray((2 * T,), ti.f32)
            t = ti.simt.block.thread_idx()
            row = ti.simt.block.block_idx()
            b = row // out.shape[1]
            c = row % out.shape[1]
            ws[t] = w[c, 0, t]
            ks[t] = k[b, c, t]
            if t + T < 2 * T - 1:
                ks[t + T] = k[b, c, t + T]
            ti.simt.block.sync()
            s = eps
            for j in range(T - 1 - t, T):       # ks[t + j] is padding below T - 1 - t
                s += ws[j] * ks[t + j]
            out[b, c, t] = s

    return forward_v2


def make_backward_v2(T):
    """GPU only (ti.simt.block): v2's gradients by hand, the block-level counterpart of the
    automatic adjoint of v0 (whose atomic adds into gw[c] come from every (b, t) at once).
    One block per (b, c) row, one thread per t, the row's taps, output gradient and window of
    k staged in shared memory:
      gw[c, 0, j] += sum over t of gout[b, c, t] * k[b, c, t + j]  (thread j; one atomic add
                     per row and tap, B-way at most),
      gk[b, c, p]  = sum over t of gout[b, c, t] * w[c, 0, p - t]  (threads p and p + T),
    with k padded on the left as the forward reads it. gw must hold zeros (or what to add to)."""
    @ti.kernel
    def backward_v2(gw: ti.types.ndarray(ndim=3), gk: ti.types.ndarray(ndim=3),
                    w: ti.types.ndarray(ndim=3), k: ti.types.ndarray(ndim=3),
                    gout: ti.types.ndarray(ndim=3)):
        ti.loop_config(block_dim=T)
        for i in range(gout.shape[0] * gout.shape[1] * T):
            ws = ti.simt.block.SharedArray((T,), ti.f32)
            gs = ti.simt.block.SharedArray((T,), ti.f32)
            ks = ti.simt.block.SharedArray((2 * T,), ti.f32)
            t = ti.simt.block.thread_idx()
            row = ti.simt.block.block_idx()
            b = row // gout.shape[1]
            c = row % gout.shape[1]
            ws[t] = w[c, 0, t]
            gs[t] = gout[b, c, t]
            ks[t] = k[b, c, t]
            if t + T < 2 * T - 1:
                ks[t + T] = k[b, c, t + T]
            ti.simt.block.sync()
            s = 0.0
            for u in range(T):
                s += gs[u] * ks[u + t]
            gw[c, 0, t] += s
            for half in ti.static(range(2)):
                p = t + half * T
                if p < 2 * T - 1:
                    a = 0.0
                    for u in range(ti.max(0, p - T + 1), ti.min(p, T - 1) + 1):
                        a += gs[u] * ws[p - u]
                    gk[b, c, p] = a

    return backward_v2


VARIANTS = {"v0": make_forward, "v1": make_forward_v1, "v2": make_forward_v2}


def torch_reference(torch, w, k, eps, T):
    import torch.nn as nn
    import torch.nn.functional as F
    C = w.shape[0]
    return eps + F.conv1d(nn.ZeroPad2d((T - 1, 0, 0, 0))(k), w, groups=C)


def main():
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--C", type=int, default=256)
    ap.add_argument("--T", type=int, default=768)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--variant", choices=sorted(VARIANTS), default="v0",
                    help="v0: the seed's naive kernel; v1: four outputs per iteration; "
                         "v2: shared memory (CUDA only)")
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args))
    # the tensors live where the kernels run: on the CPU after a fallback from cuda
    device = "cuda" if _arch.running_on_cuda() and torch.cuda.is_available() else "cpu"
    if args.variant == "v2" and not _arch.running_on_cuda():
        raise SystemExit("rwkv_conv: --variant v2 uses shared memory, which needs the CUDA "
                         "backend; no CUDA device here (use v0 or v1)")
    B, C, T, eps = args.B, args.C, args.T, 0.1
    torch.manual_seed(0)
    w = torch.rand(C, 1, T, device=device)
    k = torch.rand(B, C, T, device=device)
    kp = torch.nn.functional.pad(k, (T - 1, 0))      # the kernel reads k padded by T-1 zeros

    forward = VARIANTS[args.variant](T)
    out = torch.empty(B, C, T, device=device)
    forward(out, w, kp, eps)
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        forward(out, w, kp, eps)
    ti.sync()
    t_ti = (time.perf_counter() - t0) / args.repeat
    ref = torch_reference(torch, w, k, eps, T)
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        ref = torch_reference(torch, w, k, eps, T)
    t_torch = (time.perf_counter() - t0) / args.repeat
    err = (out - ref).abs().max().item()
    if device == "cuda":
        torch.cuda.synchronize()
    print(f"forward {args.variant} B={B} C={C} T={T}: fluxion {1e3 * t_ti:.1f} ms, F.conv1d "
          f"{1e3 * t_torch:.1f} ms, max abs difference {err:.2e}")

    # backward: the kernel as a differentiable torch operation
    if args.variant == "v2":
        print("forward matches F.conv1d" if err < 1e-3 * T else "MISMATCH")
        return     # block-level code has no adjoint: v2 is a forward kernel
    conv = ti.ad.torch_function(forward, outputs={"out": lambda w, k, eps: torch.empty(
        k.shape[0], k.shape[1], T, device=device)})
    wg = w.clone().requires_grad_()
    kg = kp.clone().requires_grad_()
    y = conv(wg, kg, eps)
    grad_out = torch.rand_like(y)
    t0 = time.perf_counter()
    y.backward(grad_out)
    t_bwd = time.perf_counter() - t0
    wr = w.clone().requires_grad_()
    kr = k.clone().requires_grad_()
    torch_reference(torch, wr, kr, eps, T).backward(grad_out)
    err_w = (wg.grad - wr.grad).abs().max().item() / wr.grad.abs().max().item()
    err_k = (kg.grad[:, :, T - 1:] - kr.grad).abs().max().item() / kr.grad.abs().max().item()
    print(f"backward: fluxion {1e3 * t_bwd:.1f} ms; relative differences from torch: "
          f"dw {err_w:.1e}, dk {err_k:.1e}")
    ok = err < 1e-3 * T and err_w < 1e-4 and err_k < 1e-4
    print("forward and backward match F.conv1d" if ok else "MISMATCH")


if __name__ == "__main__":
    main()
