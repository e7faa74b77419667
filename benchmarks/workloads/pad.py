"""The seed's staggered brick padding of a 1080x1920x3 uint8 image (torch tensors)."""
TITLE = "brick padding, 1080x1920x3 uint8, kernel over torch tensors vs torch ops"
N = 1080
QUICK_N = 270
TH, TW, PW, PH = 32, 64, 7, 5


def _setup(n):
    import torch
    from fluxion.examples.pytorch_pad import make_tile
    return torch, make_tile(torch, TH, TW), n, n * 16 // 9


def make(ti, n):
    from fluxion.examples import pytorch_pad
    torch, tile, h, w = _setup(n)
    # the same kernel source, built with either module as `ti`
    out = torch.zeros(h, w, 3, dtype=torch.uint8)
    # kernels read module globals when they compile (their first call): compile while `ti`
    # names the module under test
    saved = pytorch_pad.ti
    pytorch_pad.ti = ti
    try:
        ti_pad, _ = pytorch_pad.build(torch, h, w, TH, TW, PW, PH)
        ti_pad(out, tile)
    finally:
        pytorch_pad.ti = saved
    return (lambda: ti_pad(out, tile)), (lambda: out.numpy())


def setup_torch(n):
    from fluxion.examples import pytorch_pad
    torch, tile, h, w = _setup(n)
    _, torch_pad = pytorch_pad.build(torch, h, w, TH, TW, PW, PH)
    box = {}

    def run():
        box["out"] = torch_pad(tile)

    return run, (lambda: box["out"].numpy())
