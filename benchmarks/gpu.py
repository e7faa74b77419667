"""GPU figures, run on a machine with a CUDA device: `python -m benchmarks.gpu`.

Times, in one run, fluxion's CUDA backend against PyTorch on the same device: a warm launch
of an empty kernel, saxpy over 64M float32 (GB/s, against a device-to-device copy), a sum
reduction, the seed's padding kernel over a torch CUDA tensor against its torch-ops
version, and the RWKV convolution (the seed's naive kernel and fluxion's optimised variants,
forward, and the naive kernel's automatic backward) against `F.conv1d` and, where nvcc is
installed, the seed's hand-written CUDA kernel compiled by torch's extension loader.
"""
import time

import numpy as np


def timeit(fn, sync, n=20, warmup=3, inner=None):
    """Median seconds per call over `n` samples, each a batch of `inner` calls ending with a
    sync (as the CPU harness does): short kernels are timed by their throughput, not by the
    round trip of a synchronization after each one. `inner` defaults to enough calls for a
    batch of about a millisecond."""
    for _ in range(warmup):
        fn()
    sync()
    if inner is None:
        t0 = time.perf_counter()
        fn()
        sync()
        inner = max(1, min(100, int(1e-3 / max(time.perf_counter() - t0, 1e-7))))
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        ts.append((time.perf_counter() - t0) / inner)
    return float(np.median(ts))


def main():
    import torch

    import fluxion as ti
    ti.init(arch=ti.cuda)
    sync = ti.sync
    dev = ti.lang.runtime.get_jit().device if hasattr(ti, "lang") else None
    from fluxion.lang import runtime
    dev = runtime.get_jit().device
    print(f"device: {dev.name} (sm_{dev.sm}, {dev.multiprocessors} SMs)")

    @ti.kernel
    def empty():
        pass

    n_launch = 2000
    empty()
    sync()
    t0 = time.perf_counter()
    for _ in range(n_launch):
        empty()
    sync()
    print(f"launch_empty      fluxion {1e6 * (time.perf_counter() - t0) / n_launch:8.2f} us")

    n = 1 << 26
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")

    @ti.kernel
    def saxpy(a: ti.f32, xs: ti.types.ndarray(), ys: ti.types.ndarray()):
        for i in xs:
            ys[i] = a * xs[i] + ys[i]

    t_flux = timeit(lambda: saxpy(0.5, x, y), sync)
    t_torch = timeit(lambda: y.add_(x, alpha=0.5), torch.cuda.synchronize)
    z = torch.empty_like(x)
    t_copy = timeit(lambda: z.copy_(x), torch.cuda.synchronize)
    gb = 12 * n / 1e9
    print(f"saxpy 64M         fluxion {gb / t_flux:8.0f} GB/s  torch {gb / t_torch:8.0f} GB/s  "
          f"d2d copy {8 * n / 1e9 / t_copy:8.0f} GB/s  (fluxion/copy {gb / t_flux / (8 * n / 1e9 / t_copy):.2f})")

    out = torch.zeros(1, device="cuda")

    @ti.kernel
    def total(xs: ti.types.ndarray(), o: ti.types.ndarray()):
        for i in xs:
            o[0] += xs[i]

    def run_sum():
        out.zero_()
        total(x, out)

    t_sum = timeit(run_sum, sync)
    t_tsum = timeit(lambda: x.sum(), torch.cuda.synchronize)
    print(f"sum 64M           fluxion {1e3 * t_sum:8.3f} ms   torch {1e3 * t_tsum:8.3f} ms   "
          f"(rel. error {abs(out.item() - x.sum().item()) / x.sum().item():.1e})")

    # the seed's brick padding, on CUDA tensors, against the same padding in torch ops
    from fluxion.examples import pytorch_pad
    h, w, th, tw = 1080, 1920, 32, 64
    tile = pytorch_pad.make_tile(torch, th, tw).cuda()
    ti_pad, torch_pad = pytorch_pad.build(torch, h, w, th, tw, 7, 5)
    img = torch.zeros(h, w, 3, dtype=torch.uint8, device="cuda")

    def torch_pad_cuda():
        return torch_pad(tile)

    t_pad = timeit(lambda: ti_pad(img, tile), sync)
    t_tpad = timeit(torch_pad_cuda, torch.cuda.synchronize)
    same = torch.equal(img, torch_pad_cuda())
    print(f"pad 1080x1920x3   fluxion {1e3 * t_pad:8.3f} ms   torch ops {1e3 * t_tpad:8.3f} ms   "
          f"({t_tpad / t_pad:.0f}x; outputs {'identical' if same else 'DIFFER'})")

    rwkv(torch, ti, sync)


# the seed's hand-written CUDA kernel for the same forward (one thread per t, one block
# row per (b, c)), for the "comparable to CUDA" comparison
_CUDA_SRC = r"""
__global__ void kernel_forward(const float* w, const float* k, float* x, const float eps,
                               const int B, const int C, const int T) {
    const int i = blockIdx.y;
    const int t = threadIdx.x;
    float s = eps;
    const float* www = w + (i % C) * T + (T - 1) - t;
    const float* kk = k + i * T;
    for (int u = 0; u <= t; u++) s += www[u] * kk[u];
    x[i * T + t] = s;
}
torch::Tensor forward(torch::Tensor w, torch::Tensor k, double eps) {
    const int B = k.size(0), C = k.size(1), T = k.size(2);
    auto x = torch::empty_like(k);
    dim3 grid(1, B * C);
    kernel_forward<<<grid, T>>>(w.data_ptr<float>(), k.data_ptr<float>(), x.data_ptr<float>(),
                                (float)eps, B, C, T);
    return x;
}
"""


def _nvcc_forward(torch):
    import shutil
    if shutil.which("nvcc") is None:
        return None
    try:
        from torch.utils.cpp_extension import load_inline
        mod = load_inline("rwkv_seed", cpp_sources="torch::Tensor forward(torch::Tensor w, "
                          "torch::Tensor k, double eps);", cuda_sources=_CUDA_SRC,
                          functions=["forward"], verbose=False)
        return mod.forward
    except Exception as e:  # a broken toolchain: report, keep the other figures
        print(f"rwkv nvcc kernel unavailable: {e}")
        return None


def rwkv(torch, ti, sync):
    from fluxion.examples import rwkv_conv
    B, C, T, eps = 8, 256, 768, 0.1
    torch.manual_seed(0)
    w = torch.rand(C, 1, T, device="cuda")
    k = torch.rand(B, C, T, device="cuda")
    kp = torch.nn.functional.pad(k, (T - 1, 0))
    ref = rwkv_conv.torch_reference(torch, w, k, eps, T)
    t_conv = timeit(lambda: rwkv_conv.torch_reference(torch, w, k, eps, T),
                    torch.cuda.synchronize)
    line = f"rwkv fwd B=8 C=256 T=768  F.conv1d {1e3 * t_conv:7.3f} ms"
    nvcc = _nvcc_forward(torch)
    if nvcc is not None:
        wf = w.reshape(C, T).contiguous()
        t_nv = timeit(lambda: nvcc(wf, k, eps), torch.cuda.synchronize)
        line += f"   nvcc (seed's kernel) {1e3 * t_nv:7.3f} ms"
    print(line)
    out = torch.empty(B, C, T, device="cuda")
    for name, make in rwkv_conv.VARIANTS.items():
        fwd = make(T)
        t = timeit(lambda: fwd(out, w, kp, eps), sync)
        err = (out - ref).abs().max().item()
        print(f"rwkv fwd {name}           fluxion {1e3 * t:7.3f} ms   "
              f"(F.conv1d / fluxion {t_conv / t:.2f}; max abs diff {err:.1e})")
    conv = ti.ad.torch_function(rwkv_conv.make_forward(T), outputs={
        "out": lambda w, k, eps: torch.empty(B, C, T, device="cuda")})
    wg, kg = w.clone().requires_grad_(), kp.clone().requires_grad_()
    g = torch.rand(B, C, T, device="cuda")

    def backward():
        wg.grad = kg.grad = None
        conv(wg, kg, eps).backward(g)

    wr, kr = w.clone().requires_grad_(), k.clone().requires_grad_()

    def torch_backward():
        wr.grad = kr.grad = None
        rwkv_conv.torch_reference(torch, wr, kr, eps, T).backward(g)

    t_b = timeit(backward, sync, n=5)
    t_tb = timeit(torch_backward, torch.cuda.synchronize, n=5)
    print(f"rwkv fwd+bwd v0       fluxion {1e3 * t_b:7.3f} ms   torch {1e3 * t_tb:7.3f} ms")


if __name__ == "__main__":
    main()
