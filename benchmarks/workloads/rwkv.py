"""The RWKV depthwise 1-D convolution forward (B=8, C=256, T=768), the naive kernel of the
seed, against F.conv1d."""
TITLE = "RWKV depthwise conv1d forward, B=8 C=256 T=768, naive kernel vs F.conv1d"
N = 768
QUICK_N = 128
B, C = 8, 256


def _inputs(n):
    import torch
    torch.manual_seed(0)
    w = torch.rand(C, 1, n)
    k = torch.rand(B, C, n)
    return torch, w, k


def make(ti, n):
    from fluxion.examples import rwkv_conv
    torch, w, k = _inputs(n)
    kp = torch.nn.functional.pad(k, (n - 1, 0))
    out = torch.empty(B, C, n)
    saved = rwkv_conv.ti                 # compile (first call) while `ti` is the module tested
    rwkv_conv.ti = ti
    try:
        forward = rwkv_conv.make_forward(n)
        forward(out, w, kp, 0.1)
    finally:
        rwkv_conv.ti = saved
    return (lambda: forward(out, w, kp, 0.1)), (lambda: out.numpy())


def setup_torch(n):
    from fluxion.examples import rwkv_conv
    torch, w, k = _inputs(n)
    box = {}

    def run():
        box["out"] = rwkv_conv.torch_reference(torch, w, k, 0.1, n)

    return run, (lambda: box["out"].numpy())
