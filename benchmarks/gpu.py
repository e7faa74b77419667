"""GPU figures, run on a machine with a CUDA device: `python -m benchmarks.gpu`.

Times, in one run, fluxion's CUDA backend against PyTorch on the same device: a warm launch
of an empty kernel, saxpy over 64M float32 (GB/s, against a device-to-device copy), a sum
reduction, and the seed's padding kernel over a torch CUDA tensor against its torch-ops
version (when the pad workload is present).
"""
import time

import numpy as np


def timeit(fn, sync, n=20, warmup=3):
    for _ in range(warmup):
        fn()
    sync()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
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


if __name__ == "__main__":
    main()
