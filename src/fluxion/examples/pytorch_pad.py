"""Staggered brick padding of an image: a fluxion kernel over torch tensors vs PyTorch ops.

The seed's data-preprocessing example: fill an image with copies of a brick (a small tile
with a color gradient), rows shifted by half a brick. `ti_pad` maps each output pixel to its
pixel in the brick in one kernel over torch tensors; `torch_pad` does the same with a chain of
tensor operations. Both outputs are compared (identical) and timed.

    python -m fluxion.examples pytorch_pad [--height 1080] [--width 1920]
"""
import argparse
import time

import fluxion as ti
from fluxion.examples import _arch


def make_tile(torch, th, tw):
    """A brick with a smooth color gradient and a dark mortar border."""
    r = torch.arange(th)[:, None].expand(th, tw)
    c = torch.arange(tw)[None, :].expand(th, tw)
    tile = torch.stack([(r * 255 // max(th - 1, 1)), (c * 255 // max(tw - 1, 1)),
                        (255 - (r + c) * 255 // max(th + tw - 2, 1))], dim=-1).to(torch.uint8)
    tile[0, :] = 40
    tile[:, 0] = 40
    return tile


def build(torch, height, width, th, tw, pw, ph):
    shift_x = (tw, 0)               # the next brick along a row
    shift_y = (tw // 2, th)         # the next row, shifted by half a brick

    @ti.kernel
    def ti_pad(image_pixels: ti.types.ndarray(), tile: ti.types.ndarray()):
        for row, col in ti.ndrange(height, width):
            # image pixel -> coordinates with y up, offset by the padding
            x1, y1 = ti.math.ivec2(col - pw, height - 1 - row + ph)
            # which brick: row v, column u (rows are staggered)
            v: ti.i32 = ti.floor(y1 / th)
            u: ti.i32 = ti.floor((x1 - v * shift_y[0]) / tw)
            # coordinates inside that brick
            x2, y2 = ti.math.ivec2(x1 - u * shift_x[0] - v * shift_y[0],
                                   y1 - u * shift_x[1] - v * shift_y[1])
            x, y = ti.math.ivec2(th - 1 - y2, x2)
            for ch in ti.static(range(3)):
                image_pixels[row, col, ch] = tile[x, y, ch]

    def torch_pad(tile):
        rows = torch.arange(height, device=tile.device).view(-1, 1).expand(height, width)
        cols = torch.arange(width, device=tile.device).view(1, -1).expand(height, width)
        x1 = cols - pw
        y1 = height - 1 - rows + ph
        v = torch.floor(y1 / th).to(torch.int64)
        u = torch.floor((x1 - v * shift_y[0]) / tw).to(torch.int64)
        x2 = x1 - u * shift_x[0] - v * shift_y[0]
        y2 = y1 - u * shift_x[1] - v * shift_y[1]
        flat = ((th - 1 - y2) * tw + x2).reshape(-1)
        return torch.index_select(tile.view(-1, 3), 0, flat).view(height, width, 3)

    return ti_pad, torch_pad


def main():
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--height", type=int, default=1080)
    ap.add_argument("--width", type=int, default=1920)
    ap.add_argument("--repeat", type=int, default=10)
    _arch.add_option(ap)
    args = ap.parse_args()
    ti.init(arch=_arch.of(args))
    th, tw, pw, ph = 32, 64, 7, 5
    tile = make_tile(torch, th, tw)
    ti_pad, torch_pad = build(torch, args.height, args.width, th, tw, pw, ph)
    out = torch.zeros(args.height, args.width, 3, dtype=torch.uint8)

    ti_pad(out, tile)                                  # compile
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        ti_pad(out, tile)
    ti.sync()
    t_ti = (time.perf_counter() - t0) / args.repeat
    ref = torch_pad(tile)
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        ref = torch_pad(tile)
    t_torch = (time.perf_counter() - t0) / args.repeat
    same = torch.equal(out, ref)
    print(f"image {args.height}x{args.width}x3 uint8, brick {th}x{tw}")
    print(f"ti_pad    {1e3 * t_ti:8.3f} ms")
    print(f"torch_pad {1e3 * t_torch:8.3f} ms  ({t_torch / t_ti:.1f}x slower)")
    print("outputs identical" if same else "OUTPUTS DIFFER")


if __name__ == "__main__":
    main()
