"""The RWKV depthwise 1-D convolution as a fluxion kernel, forward and backward, against
PyTorch's `F.conv1d`.

out[b, c, t] = eps + sum over u of w[c, 0, (T-1)-(t-u)] * k[b, c, u+T-1], for u in
(t-T, t], with k padded on the left by T-1 zeros: the seed's `taichi_forward_v0`, written as
the naive loop. Its backward comes from fluxion's reverse mode (`ti.ad.torch_function`), and
both are compared with `eps + F.conv1d(ZeroPad2d((T-1, 0, 0, 0))(k), w.unsqueeze(1), groups=C)`.

    python -m fluxion.examples rwkv_conv [--B 8] [--C 256] [--T 768]
"""
import argparse
import time

import fluxion as ti


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
    args = ap.parse_args()
    ti.init(arch=ti.cpu)
    B, C, T, eps = args.B, args.C, args.T, 0.1
    torch.manual_seed(0)
    w = torch.rand(C, 1, T)
    k = torch.rand(B, C, T)
    kp = torch.nn.functional.pad(k, (T - 1, 0))      # the kernel reads k padded by T-1 zeros

    forward = make_forward(T)
    out = torch.empty(B, C, T)
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
    print(f"forward B={B} C={C} T={T}: fluxion {1e3 * t_ti:.1f} ms, F.conv1d "
          f"{1e3 * t_torch:.1f} ms, max abs difference {err:.2e}")

    # backward: the kernel as a differentiable torch operation
    conv = ti.ad.torch_function(forward, outputs={"out": lambda w, k, eps: torch.empty(
        k.shape[0], k.shape[1], T)})
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
