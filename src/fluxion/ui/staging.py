"""What `ti.ui` is given (fields, ndarrays, numpy arrays, tuples) as contiguous numpy arrays
of the rasteriser's types."""
from __future__ import annotations

import numpy as np

from fluxion.lang.field import Field
from fluxion.lang.ndarray import Ndarray


def as_array(x, what):
    """x as a numpy array (a field or ndarray is read back; numpy arrays are not copied)."""
    if isinstance(x, (Field, Ndarray)):
        return x.to_numpy()
    if hasattr(x, "to_numpy"):
        return x.to_numpy()
    try:
        return np.asarray(x)
    except Exception as e:
        raise TypeError(f"ti.ui: {what} must be a field, an ndarray or a numpy array, got "
                        f"{type(x).__name__}") from e


def vectors(x, n, what):
    """An (N, n) float32 array of vectors (a field of n-vectors, or an array shaped so)."""
    a = as_array(x, what)
    if a.ndim != 2 or a.shape[1] != n:
        raise ValueError(f"ti.ui: {what} must hold {n}-vectors (shape (N, {n})), got shape "
                         f"{a.shape}")
    return np.ascontiguousarray(a, np.float32)


def colors(x, count, what):
    """(count, 3) float32 RGB from per-element colours (RGB or RGBA: alpha is dropped)."""
    a = as_array(x, what)
    if a.ndim != 2 or a.shape[1] not in (3, 4):
        raise ValueError(f"ti.ui: {what} must hold RGB or RGBA colours (shape (N, 3) or "
                         f"(N, 4)), got shape {a.shape}")
    if a.shape[0] < count:
        raise ValueError(f"ti.ui: {what} has {a.shape[0]} colours for {count} elements")
    return np.ascontiguousarray(a[:count, :3], np.float32)


def color(c, what="color"):
    """One RGB colour, three floats in [0, 1]."""
    a = np.asarray(c, np.float32).reshape(-1)
    if a.shape[0] not in (3, 4):
        raise ValueError(f"ti.ui: {what} must be an (r, g, b) triple, got {c!r}")
    return a[:3].copy()


def indices(x, per, count, what):
    """A flat int32 index array of whole primitives (`per` indices each), checked against
    `count` vertices."""
    a = as_array(x, what).reshape(-1)
    if a.dtype.kind not in "iu":
        raise TypeError(f"ti.ui: {what} must be integers, got {a.dtype}")
    if a.shape[0] % per:
        raise ValueError(f"ti.ui: {what} has {a.shape[0]} entries, not a multiple of {per}")
    if a.size and (a.min() < 0 or a.max() >= count):
        raise IndexError(f"ti.ui: {what} refers to vertex {int(a.max())} (or "
                         f"{int(a.min())}) of {count}")
    return np.ascontiguousarray(a, np.int32)


def image(x):
    """An image for set_image as (w, h, 3) float32 in [0, 1], indexed [x, y] with y up:
    a 2-D array or scalar field is grey; one or two channels ((w, h, 1), (w, h, 2), a field
    of 1- or 2-vectors) are red, and red and green, over 0 (Taichi's GGUI stages only the
    channels given, and greys only a 2-D image); RGBA loses its alpha; integers are
    0..255."""
    a = as_array(x, "the image")
    grey = a.ndim == 2
    if grey:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[2] not in (1, 2, 3, 4):
        raise ValueError(f"ti.ui: set_image takes a (w, h), (w, h, 1), (w, h, 2), (w, h, 3) "
                         f"or (w, h, 4) image, got shape {a.shape}")
    if a.shape[2] < 3 and not grey:
        a = np.concatenate([a, np.zeros(a.shape[:2] + (3 - a.shape[2],), a.dtype)], axis=2)
    # Alpha is dropped (a view) before any conversion and grey is widened to RGB only after
    # it, and integers are scaled in place: each pixel is converted once, in the fewest bytes.
    if a.shape[2] != 1:
        a = a[:, :, :3]
    if a.dtype.kind in "iu":
        a = a.astype(np.float32)
        a *= np.float32(1 / 255)
    if a.shape[2] == 1:
        return np.repeat(np.asarray(a, np.float32), 3, axis=2)
    return np.ascontiguousarray(a, np.float32)
