"""Image files and image arrays in the original system's convention.

An image is an array (or a field / ndarray with `.to_numpy()`) indexed [x, y]: x to the right,
y *up*, shape (w, h) for grey or (w, h, c) with c in 1..4 channels; values are float in [0, 1]
or uint8 in [0, 255]. Pillow stores rows top-down, so every crossing between the two swaps the
axes and flips y; `to_rows` and `from_rows` are the only places that do it, and `ti.GUI` uses
them too, so that `set_image`, `imwrite` and `imread` agree pixel for pixel.

Pillow (the `gui` extra) is imported only when a file is touched, so `import fluxion` works
without it.
"""
from __future__ import annotations

import os
import sys

import numpy as np

# Pillow's mode for each channel count.
_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


def require_pillow():
    try:
        import PIL.Image  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("fluxion's GUI and image tools need Pillow: "
                          "pip install 'fluxion[gui]' (or pip install pillow)") from e
    return PIL.Image


def as_numpy(img):
    """A numpy array from an array, a list, or anything with `.to_numpy()` (fields, ndarrays)."""
    if hasattr(img, "to_numpy"):
        img = img.to_numpy()
    return np.asarray(img)


def to_uint8(img):
    """The image as uint8, same shape. Floats are clipped to [0, 1] and rounded (not
    truncated), so that writing k/255 and reading it back gives k exactly."""
    a = as_numpy(img)
    if a.dtype == np.uint8:
        return a
    if a.dtype == np.bool_:
        return a.astype(np.uint8) * 255
    if np.issubdtype(a.dtype, np.integer):
        return np.clip(a, 0, 255).astype(np.uint8)
    a = np.nan_to_num(a.astype(np.float32), nan=0.0)
    return np.floor(np.clip(a, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def to_rows(img):
    """[x, y] (y up) -> Pillow's row-major top-down layout: (h, w) or (h, w, c)."""
    a = np.asarray(img)
    if a.ndim not in (2, 3):
        raise ValueError(f"an image must have shape (w, h) or (w, h, c); got {a.shape}")
    return np.ascontiguousarray(np.swapaxes(a, 0, 1)[::-1])


def from_rows(rows):
    """Pillow's (h, w[, c]) rows, top row first -> [x, y] with y up (the inverse of to_rows)."""
    return np.ascontiguousarray(np.swapaxes(np.asarray(rows)[::-1], 0, 1))


def to_rgb_rows(img):
    """Any image -> uint8 (h, w, 3) rows: grey is repeated, a 4th (alpha) channel dropped."""
    a = to_uint8(img)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    elif a.ndim == 3 and a.shape[2] == 2:            # grey + alpha
        a = np.repeat(a[:, :, :1], 3, axis=2)
    elif a.ndim != 3 or a.shape[2] not in (3, 4):
        raise ValueError(f"an image must have shape (w, h) or (w, h, 1..4); got {a.shape}")
    return to_rows(a[:, :, :3])


def _pil_image(img):
    """An image in the [x, y] convention -> a PIL image of as many channels as it has."""
    Image = require_pillow()
    a = to_uint8(img)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    channels = 1 if a.ndim == 2 else a.shape[2]
    if a.ndim not in (2, 3) or channels not in _MODES:
        raise ValueError(f"an image must have shape (w, h) or (w, h, 1..4); got {a.shape}")
    rows = to_rows(a)
    if channels == 2:
        # Pillow cannot build 'LA' straight from an array; merge two 'L' bands instead.
        return Image.merge("LA", [Image.fromarray(rows[:, :, k]) for k in range(2)])
    return Image.fromarray(rows, _MODES[channels])


def _makedirs_for(filename):
    d = os.path.dirname(os.fspath(filename))
    if d:
        os.makedirs(d, exist_ok=True)


def imwrite(img, filename):
    """Write an image ([x, y] with y up; float in [0, 1] or uint8; 1 to 4 channels) to a file
    whose format Pillow picks from the extension (.png, .jpg, .bmp, ...). Missing directories
    are created."""
    im = _pil_image(img)
    ext = os.path.splitext(os.fspath(filename))[1].lower()
    if ext in (".jpg", ".jpeg") and im.mode in ("LA", "RGBA"):
        im = im.convert(im.mode[:-1])                # JPEG has no alpha channel
    _makedirs_for(filename)
    im.save(filename)


def imread(filename, channels=0):
    """Read an image file as uint8 indexed [x, y] with y up.

    channels=0 keeps the file's own channels; 1, 2, 3 or 4 convert to grey, grey + alpha, RGB
    or RGBA. A one-channel result has shape (w, h) (not (w, h, 1)), so that
    `imread(f)` after `imwrite(grey, f)` gives back `grey` exactly.
    """
    Image = require_pillow()
    with Image.open(filename) as im:
        if im.mode in ("I", "I;16", "I;16B", "I;16L"):
            # 16-bit grey: scale to 8 bits (Pillow's own convert would clip at 255)
            wide = np.asarray(im, dtype=np.float64)
            im = Image.fromarray(np.clip(np.round(wide / 257.0), 0, 255).astype(np.uint8), "L")
        if channels:
            if channels not in _MODES:
                raise ValueError(f"imread: channels must be 0, 1, 2, 3 or 4, not {channels}")
            mode = _MODES[channels]
        elif im.mode in _MODES.values():
            mode = im.mode
        elif im.mode == "P":                         # palette: expand, keeping transparency
            mode = "RGBA" if "transparency" in im.info else "RGB"
        elif im.mode in ("PA",):
            mode = "RGBA"
        elif im.mode in ("1", "F"):
            mode = "L"
        else:                                        # CMYK, YCbCr, LAB, ...
            mode = "RGB"
        rows = np.asarray(im.convert(mode) if im.mode != mode else im)
    return from_rows(rows)


def imresize(img, w, h=-1):
    """Nearest-neighbour resize to w x h (h = w when not given), keeping dtype and channels.
    Plain numpy indexing, so it works on float images too and needs no Pillow."""
    a = as_numpy(img)
    h = w if h is None or h < 0 else h
    if w <= 0 or h <= 0:
        raise ValueError(f"imresize: bad size {w} x {h}")
    # The source texel whose centre is nearest to each target texel's centre.
    xs = np.minimum(((np.arange(w) + 0.5) * a.shape[0] / w).astype(np.int64), a.shape[0] - 1)
    ys = np.minimum(((np.arange(h) + 0.5) * a.shape[1] / h).astype(np.int64), a.shape[1] - 1)
    return np.ascontiguousarray(a[xs][:, ys])


def has_display():
    """Whether a window can be opened: a DISPLAY (X11) or WAYLAND_DISPLAY on Linux and other
    Unixes; Windows and macOS always have a desktop. FLUXION_HEADLESS=1 forces headless."""
    if os.environ.get("FLUXION_HEADLESS", "") not in ("", "0"):
        return False
    if sys.platform.startswith("win") or sys.platform == "darwin":
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
