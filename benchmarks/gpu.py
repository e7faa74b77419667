"""GPU figures, run on a machine with a CUDA device: `python -m benchmarks.gpu`.

Times, in one run, fluxion's CUDA backend against PyTorch on the same device and against the
original system's package (Taichi) where its CUDA build runs: a warm launch of an empty
kernel, saxpy over 64M float32 (GB/s, against a device-to-device copy), a sum reduction, the
seed's padding kernel over a torch CUDA tensor against its torch-ops version, and the RWKV
convolution (the seed's naive kernel and fluxion's optimised variants, forward; the naive
kernel's automatic backward and v2's hand-written one) against `F.conv1d` and, where nvcc is
installed, the seed's
hand-written CUDA kernel compiled by torch's extension loader.

`python -m benchmarks.gpu --arch cpu` runs the same script on the CPU at small sizes: a check
of the script itself on a machine without a GPU. `--json PATH` writes the figures (seconds,
bytes per second) with the device and the date; a CUDA run writes
benchmarks/results/gpu-latest.json unless told otherwise.
"""
import argparse
import time

FIGURES = {}      # name -> seconds (or bytes per second, or a ratio), for --json

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


def peers(arch):
    """[(name, module)]: fluxion, and Taichi when it imports and starts on that arch."""
    import fluxion
    fluxion.init(arch=getattr(fluxion, arch))
    out = [("fluxion", fluxion)]
    try:
        import taichi
        taichi.init(arch=getattr(taichi, arch), log_level=taichi.WARN)
        out.append(("taichi", taichi))
    except Exception as e:    # not installed, or no CUDA build: the other figures stand
        print(f"taichi unavailable on {arch}: {type(e).__name__}: {e}")
    return out


def simple_kernels(ti):
    """The launch, saxpy and sum kernels, built with module `ti`."""
    @ti.kernel
    def empty():
        pass

    @ti.kernel
    def saxpy(a: ti.f32, xs: ti.types.ndarray(), ys: ti.types.ndarray()):
        for i in xs:
            ys[i] = a * xs[i] + ys[i]

    @ti.kernel
    def total(xs: ti.types.ndarray(), o: ti.types.ndarray()):
        for i in xs:
            o[0] += xs[i]

    return empty, saxpy, total


def with_module(mod, ti, make, first_call):
    """`make()`, and `first_call` of what it made, while example module `mod` refers to `ti`
    (the examples import fluxion, and a kernel reads the module's globals when its first
    call compiles it)."""
    saved = mod.ti
    mod.ti = ti
    try:
        made = make()
        first_call(made)
        return made
    finally:
        mod.ti = saved


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--json", help="where to write the figures")
    args = ap.parse_args(argv)
    import torch
    device = "cuda" if args.arch == "cuda" else "cpu"
    small = args.arch == "cpu"
    tsync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    mods = peers(args.arch)
    if args.arch == "cuda":
        from fluxion.lang import runtime
        dev = runtime.get_jit().device
        print(f"device: {dev.name} (sm_{dev.sm}, {dev.multiprocessors} SMs)")
        FIGURES["device"] = f"{dev.name} (sm_{dev.sm}, {dev.multiprocessors} SMs)"

    n = 1 << (20 if small else 26)
    x = torch.rand(n, device=device)
    y = torch.rand(n, device=device)
    out = torch.zeros(1, device=device)
    z = torch.empty_like(x)
    t_copy = timeit(lambda: z.copy_(x), tsync)
    t_tsax = timeit(lambda: y.add_(x, alpha=0.5), tsync)
    t_tsum = timeit(lambda: x.sum(), tsync)
    gb = 12 * n / 1e9
    FIGURES.update({"copy_bytes_per_s": 8 * n / t_copy, "torch_saxpy_s": t_tsax,
                    "torch_sum_s": t_tsum})
    print(f"saxpy {n >> 20}M: device-to-device copy {8 * n / 1e9 / t_copy:7.0f} GB/s, "
          f"torch {gb / t_tsax:7.0f} GB/s; sum: torch {1e3 * t_tsum:7.3f} ms")
    for name, ti in mods:
        empty, saxpy, total = simple_kernels(ti)
        empty()
        ti.sync()
        launches = 2000
        t0 = time.perf_counter()
        for _ in range(launches):
            empty()
        ti.sync()
        t_launch = (time.perf_counter() - t0) / launches
        t_sax = timeit(lambda: saxpy(0.5, x, y), ti.sync)

        def run_sum():
            out.zero_()
            total(x, out)

        t_sum = timeit(run_sum, ti.sync)
        rel = abs(out.item() - x.sum().item()) / x.sum().item()
        FIGURES.update({f"{name}_launch_s": t_launch, f"{name}_saxpy_s": t_sax,
                        f"{name}_saxpy_of_copy": gb / t_sax / (8 * n / 1e9 / t_copy),
                        f"{name}_sum_s": t_sum})
        print(f"{name:8} launch {1e6 * t_launch:7.2f} us   saxpy {gb / t_sax:7.0f} GB/s "
              f"({gb / t_sax / (8 * n / 1e9 / t_copy):.2f} of copy)   sum {1e3 * t_sum:7.3f} ms "
              f"(rel. error {rel:.1e})")

    pad(torch, device, tsync, mods, small)
    rwkv(torch, device, tsync, mods, small)
    path = args.json or ("benchmarks/results/gpu-latest.json" if args.arch == "cuda" else None)
    if path:
        import json
        import os
        FIGURES["date"] = time.strftime("%Y-%m-%d %H:%M")
        FIGURES["arch"] = args.arch
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            json.dump(FIGURES, f, indent=1, sort_keys=True)
        print(f"wrote {path}")


def pad(torch, device, tsync, mods, small):
    """The seed's brick padding on tensors of the device, against the same in torch ops."""
    from fluxion.examples import pytorch_pad
    h, w, th, tw = (270, 480, 32, 64) if small else (1080, 1920, 32, 64)
    tile = pytorch_pad.make_tile(torch, th, tw).to(device)
    _, torch_pad = pytorch_pad.build(torch, h, w, th, tw, 7, 5)
    t_tpad = timeit(lambda: torch_pad(tile), tsync)
    ref = torch_pad(tile)
    print(f"pad {h}x{w}x3: torch ops {1e3 * t_tpad:8.3f} ms")
    FIGURES["torch_pad_s"] = t_tpad
    for name, ti in mods:
        img = torch.zeros(h, w, 3, dtype=torch.uint8, device=device)
        ti_pad, _ = with_module(pytorch_pad, ti,
                                lambda: pytorch_pad.build(torch, h, w, th, tw, 7, 5),
                                lambda made: made[0](img, tile))
        t_pad = timeit(lambda: ti_pad(img, tile), ti.sync)
        same = torch.equal(img, ref)
        FIGURES[f"{name}_pad_s"] = t_pad
        FIGURES[f"{name}_pad_identical"] = bool(same)
        print(f"{name:8} pad {1e3 * t_pad:8.3f} ms   (torch ops / {name} {t_tpad / t_pad:.0f}x; "
              f"output {'identical' if same else 'DIFFERS'})")


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


def rwkv(torch, device, tsync, mods, small):
    from fluxion.examples import rwkv_conv
    B, C, T, eps = (2, 32, 128, 0.1) if small else (8, 256, 768, 0.1)
    torch.manual_seed(0)
    w = torch.rand(C, 1, T, device=device)
    k = torch.rand(B, C, T, device=device)
    kp = torch.nn.functional.pad(k, (T - 1, 0))
    ref = rwkv_conv.torch_reference(torch, w, k, eps, T)
    t_conv = timeit(lambda: rwkv_conv.torch_reference(torch, w, k, eps, T), tsync)
    line = f"rwkv fwd B={B} C={C} T={T}: F.conv1d {1e3 * t_conv:7.3f} ms"
    FIGURES["conv1d_fwd_s"] = t_conv
    nvcc = _nvcc_forward(torch) if device == "cuda" else None
    if nvcc is not None:
        wf = w.reshape(C, T).contiguous()
        t_nv = timeit(lambda: nvcc(wf, k, eps), tsync)
        line += f"   nvcc (seed's kernel) {1e3 * t_nv:7.3f} ms"
        FIGURES["nvcc_fwd_s"] = t_nv
    print(line)
    out = torch.empty(B, C, T, device=device)
    for name, ti in mods:
        variants = rwkv_conv.VARIANTS if name == "fluxion" else {"v0": rwkv_conv.make_forward}
        for vname, make in variants.items():
            if vname == "v2" and device != "cuda":
                continue        # block-level code: CUDA only
            fwd = with_module(rwkv_conv, ti, lambda: make(T), lambda f: f(out, w, kp, eps))
            t = timeit(lambda: fwd(out, w, kp, eps), ti.sync)
            err = (out - ref).abs().max().item()
            FIGURES[f"{name}_rwkv_fwd_{vname}_s"] = t
            print(f"{name:8} rwkv fwd {vname} {1e3 * t:7.3f} ms   (F.conv1d / {name} "
                  f"{t_conv / t:.2f}; max abs diff {err:.1e})")
    import fluxion as ti
    conv = ti.ad.torch_function(rwkv_conv.make_forward(T), outputs={
        "out": lambda w, k, eps: torch.empty(B, C, T, device=device)})
    wg, kg = w.clone().requires_grad_(), kp.clone().requires_grad_()
    g = torch.rand(B, C, T, device=device)

    def backward():
        wg.grad = kg.grad = None
        conv(wg, kg, eps).backward(g)

    wr, kr = w.clone().requires_grad_(), k.clone().requires_grad_()

    def torch_backward():
        wr.grad = kr.grad = None
        rwkv_conv.torch_reference(torch, wr, kr, eps, T).backward(g)

    t_b = timeit(backward, ti.sync, n=5)
    t_tb = timeit(torch_backward, tsync, n=5)
    print(f"rwkv fwd+bwd v0       fluxion {1e3 * t_b:7.3f} ms   torch {1e3 * t_tb:7.3f} ms")
    FIGURES.update({"fluxion_rwkv_fwd_bwd_v0_s": t_b, "torch_rwkv_fwd_bwd_s": t_tb})
    if device == "cuda":
        # v2 forward and its hand-written block-level backward
        fwd2, bwd2 = rwkv_conv.make_forward_v2(T), rwkv_conv.make_backward_v2(T)
        gw2 = torch.zeros(C, 1, T, device=device)
        gk2 = torch.empty(B, C, 2 * T - 1, device=device)

        def v2_both():
            fwd2(out, w, kp, eps)
            gw2.zero_()
            bwd2(gw2, gk2, w, kp, g)

        t_v2 = timeit(v2_both, ti.sync, n=5)
        FIGURES["fluxion_rwkv_fwd_bwd_v2_s"] = t_v2
        torch_backward()
        tsync()
        err = max(((gw2 - wr.grad).abs().max() / wr.grad.abs().max()).item(),
                  ((gk2[:, :, T - 1:] - kr.grad).abs().max() / kr.grad.abs().max()).item())
        print(f"rwkv fwd+bwd v2 (backward by hand) fluxion {1e3 * t_v2:7.3f} ms   torch "
              f"{1e3 * t_tb:7.3f} ms   (torch / fluxion {t_tb / t_v2:.2f}; rel. diff {err:.1e})")


if __name__ == "__main__":
    main()
