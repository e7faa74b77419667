"""`ti.Texture`, `ti.Format` and the texture kernel arguments, on every fluxion target.

The original system has textures only on its graphics backends (Vulkan, OpenGL): on its CPU
they do not exist. Here a texture is an ndarray of 4-vectors of f32 (`Texture` is a
`ti.Vector.ndarray(4, ti.f32, shape)`), and the texture operations are kernel code over it:

- `ti.types.texture(num_dimensions=d)` arguments sample: `tex.sample_lod(uv, lod)` filters
  linearly between the 2^d nearest texels at normalized coordinates `uv` (texel k's centre at
  (k + 0.5) / n), with repeat addressing (uv and uv + 1 read the same), as the original's
  Vulkan sampler does; `tex.fetch(index, lod)` reads one texel.
- `ti.types.rw_texture(num_dimensions=d, fmt=..., lod=0)` arguments `load(index)` and
  `store(index, value)`; a store rounds the value to the format (8-bit formats keep 256
  levels in [0, 1], half formats an f16, integer formats an integer in range).
- Each texel holds what a read returns: the format's channels, 0 in the channels it lacks and
  1 in alpha when it has none (Vulkan's rule for reading narrower formats).

Textures have one level of detail: `lod` is accepted and level 0 is read. `fetch`/`load`/
`store` outside the texture clamp the index to its edge; with `ti.init(debug=True)` they
raise, naming the argument.
"""
from __future__ import annotations

import numpy as np

from fluxion.frontend.access import ArrayValue, ndarray_access
from fluxion.frontend.transformer import store_value
from fluxion.ir import builder
from fluxion.ir import types as T
from fluxion.ir.errors import FluxionSyntaxError
from fluxion.lang import builtins as B
from fluxion.lang.matrix import Matrix, MatrixType
from fluxion.lang.ndarray import NdarrayType, VectorNdarray, register_array_class


class _Format:
    """One texel format: its name, channels and how a stored value is rounded."""

    def __init__(self, name, channels, kind, bits):
        self.name = name
        self.channels = channels
        self.kind = kind        # "unorm", "srgb", "float", "int" or "uint"
        self.bits = bits

    def __repr__(self):
        return f"ti.Format.{self.name}"


def _parse(name):
    if name.startswith("depth"):
        return _Format(name, 1, "float" if name == "depth32f" else "unorm",
                       32 if name == "depth32f" else 16 if name == "depth16" else 24)
    letters = len(name) - len(name.lstrip("rgba"))
    rest = name[letters:]
    if rest.endswith("srgb"):
        return _Format(name, letters, "srgb", 8)
    kind = {"f": "float", "i": "int", "u": "uint"}.get(rest[-1:], "unorm")
    bits = int(rest.rstrip("fiu"))
    return _Format(name, letters, kind, bits)


class Format:
    """`ti.Format.<name>`: the texel formats of the original system (the same names)."""


for _name in ("r8 rg8 rgba8 rgba8srgb bgra8 bgra8srgb r8u rg8u rgba8u r8i rg8i rgba8i "
              "r16 rg16 rgb16 rgba16 r16u rg16u rgb16u rgba16u r16i rg16i rgb16i rgba16i "
              "r16f rg16f rgb16f rgba16f r32u rg32u rgb32u rgba32u r32i rg32i rgb32i rgba32i "
              "r32f rg32f rgb32f rgba32f depth16 depth24stencil8 depth32f").split():
    setattr(Format, _name, _parse(_name.replace("bgra", "rgba")))
    getattr(Format, _name).name = _name
Format.unknown = None


def _round_np(fmt, v):
    """A float array of texels (..., 4) as the format keeps them (NumPy, for Python scope)."""
    v = np.asarray(v, dtype=np.float64)
    out = np.zeros(v.shape[:-1] + (4,), dtype=np.float64)
    c = fmt.channels
    x = v[..., :c]
    if fmt.kind == "unorm":
        # (a half rounds up, in Python scope and in kernels alike)
        top = 2.0 ** fmt.bits - 1
        x = np.floor(np.clip(x, 0.0, 1.0) * top + 0.5) / top
    elif fmt.kind == "srgb":
        x = _srgb_decode(np.floor(_srgb_encode(np.clip(x, 0.0, 1.0)) * 255.0 + 0.5) / 255.0)
    elif fmt.kind == "float":
        x = x.astype(np.float16 if fmt.bits == 16 else np.float32)
    else:
        lo, hi = _int_range(fmt)
        x = np.clip(np.trunc(x), lo, hi)
    out[..., :c] = x
    if c < 4:
        out[..., 3] = 1.0
    return out.astype(np.float32)


def _int_range(fmt):
    if fmt.kind == "uint":
        return 0.0, 2.0 ** fmt.bits - 1
    return -(2.0 ** (fmt.bits - 1)), 2.0 ** (fmt.bits - 1) - 1


def _srgb_encode(x):
    return np.where(x <= 0.0031308, x * 12.92, 1.055 * np.power(x, 1 / 2.4) - 0.055)


def _srgb_decode(x):
    return np.where(x <= 0.04045, x / 12.92, np.power((x + 0.055) / 1.055, 2.4))


class Texture(VectorNdarray):
    """`ti.Texture(fmt, arr_shape)`: a 1-, 2- or 3-D texture of format `fmt`."""

    def __init__(self, fmt, arr_shape):
        if not isinstance(fmt, _Format):
            raise TypeError(f"ti.Texture: the format is a ti.Format (ti.Format.rgba8, "
                            f"ti.Format.r32f, ...), got {fmt!r}")
        shape = tuple(int(n) for n in arr_shape)
        if not 1 <= len(shape) <= 3:
            raise ValueError(f"ti.Texture: a texture has 1, 2 or 3 dimensions, got shape "
                             f"{shape}")
        VectorNdarray.__init__(self, 4, T.f32, shape)
        self.__class__ = Texture     # (the ndarray's constructor picks its own class)
        self.fmt = fmt
        self.num_dims = len(shape)
        self.arr[...] = _round_np(fmt, np.zeros(shape + (4,)))

    def _load_channels(self, values, what):
        values = np.asarray(values)
        if values.shape[:self.num_dims] != self.shape:
            raise ValueError(f"Texture.{what}: shape {values.shape[:self.num_dims]} differs "
                             f"from the texture's {self.shape}")
        if values.ndim == self.num_dims:
            values = values[..., None]
        texels = np.zeros(self.shape + (4,))
        n = min(values.shape[-1], 4)
        texels[..., :n] = values[..., :n]
        self.arr[...] = _round_np(self.fmt, texels)

    def from_ndarray(self, ndarray):
        """Copy an ndarray of the texture's shape (scalars fill red; vectors the first
        channels) into the texture, rounded to its format."""
        self._load_channels(ndarray.to_numpy(), "from_ndarray")

    def from_field(self, field):
        """Copy a field of the texture's shape into it, as `from_ndarray`."""
        self._load_channels(field.to_numpy(), "from_field")

    def from_image(self, image):
        """Load a PIL image into a 2-D `rgba8` texture of the image's size, turned as the
        original turns it (a quarter counter-clockwise: texel (x, y) is the pixel of row y,
        column width - 1 - x); alpha 0."""
        from PIL import Image
        if not isinstance(image, Image.Image):
            raise TypeError(f"Texture.from_image: expected a PIL image, got "
                            f"{type(image).__name__}")
        self._check_image("from_image")
        if image.mode != "RGB":
            image = image.convert("RGB")
        if image.size != tuple(self.shape):
            raise ValueError(f"Texture.from_image: the image is {image.size}, the texture "
                             f"{tuple(self.shape)}")
        rgb = np.asarray(image.rotate(90, expand=True), dtype=np.float64)
        texels = np.zeros(self.shape + (4,))
        texels[..., :3] = rgb / 255.0
        self.arr[...] = _round_np(self.fmt, texels)

    def to_image(self):
        """The texture as a PIL RGB image (a 2-D `rgba8` texture)."""
        from PIL import Image
        self._check_image("to_image")
        rgb = np.round(self.arr[..., :3].astype(np.float64) * 255.0).astype(np.uint8)
        return Image.fromarray(rgb).rotate(270, expand=True)

    def _check_image(self, what):
        if self.num_dims != 2 or self.fmt.name != "rgba8":
            raise ValueError(f"Texture.{what}: only a 2-D ti.Format.rgba8 texture converts "
                             f"to and from images (this one is {self.num_dims}-D "
                             f"{self.fmt.name})")


register_array_class(Texture)


def _entries(v, n, what):
    entries = list(v.entries) if isinstance(v, Matrix) else list(v) \
        if isinstance(v, (list, tuple)) else [v]
    if len(entries) != n:
        raise FluxionSyntaxError(f"{what}: expected {n} values for a {n}-D texture, got "
                                 f"{len(entries)}")
    return entries


class _TextureValue(ArrayValue):
    """A texture argument inside a kernel."""

    def _texel_index(self, index, what):
        idx = [B.cast(i, T.i32) for i in _entries(index, self.arg.desc.ndim, what)]
        if not builder.current().cfg.check_out_of_bound:
            idx = [B.max(B.min(i, n - 1), 0) for i, n in zip(idx, self.shape)]
        return idx

    def _read(self, idx):
        return Matrix(list(ndarray_access(self, tuple(idx)).entries))


class TextureSampler(_TextureValue):
    """`ti.types.texture(num_dimensions=d)` inside a kernel: sampled and fetched."""

    def sample_lod(self, uv, lod):
        d = self.arg.desc.ndim
        corners = [(1.0, [])]
        for k, u in enumerate(_entries(uv, d, "Texture.sample_lod")):
            n = self.shape[k]
            u = B.cast(u, T.f32)
            # repeat addressing: only the fraction of u matters; texel centres at (i + .5) / n
            x = (u - B.floor(u)) * B.cast(n, T.f32) - 0.5
            x0 = B.floor(x)
            f = x - x0
            i0 = B.cast(x0, T.i32)
            i0 = B.select(i0 < 0, i0 + n, i0)
            i1 = B.select(i0 + 1 >= n, i0 + 1 - n, i0 + 1)
            corners = [(w * wk, idx + [ik]) for w, idx in corners
                       for wk, ik in ((1.0 - f, i0), (f, i1))]
        acc = None
        for w, idx in corners:
            term = self._read(idx) * w
            acc = term if acc is None else acc + term
        return acc

    def fetch(self, index, lod):
        return self._read(self._texel_index(index, "Texture.fetch"))


class RWTextureAccessor(_TextureValue):
    """`ti.types.rw_texture(num_dimensions=d, fmt=..., lod=0)` inside a kernel."""

    fmt = None     # set on the subclass made per annotation

    def load(self, index):
        return self._read(self._texel_index(index, "Texture.load"))

    def store(self, index, value):
        fmt = self.fmt
        vals = list(value.entries) if isinstance(value, Matrix) else list(value) \
            if isinstance(value, (list, tuple)) else [value]
        if len(vals) > 4:
            raise FluxionSyntaxError(f"Texture.store: a texel has at most 4 channels, got "
                                     f"{len(vals)} values")
        vals = [B.cast(v, T.f32) for v in vals] + [0.0] * (4 - len(vals))
        out = []
        for c in range(4):
            if c >= fmt.channels:
                out.append(1.0 if c == 3 else 0.0)
            else:
                out.append(_round_kernel(fmt, vals[c]))
        target = ndarray_access(self, tuple(self._texel_index(index, "Texture.store")))
        store_value(target, Matrix(out))


def _round_kernel(fmt, x):
    """One channel as the format keeps it (kernel code; as _round_np)."""
    if fmt.kind in ("unorm", "srgb"):
        x = B.min(B.max(x, 0.0), 1.0)
        if fmt.kind == "srgb":
            enc = B.select(x <= 0.0031308, x * 12.92, 1.055 * B.pow(x, 1 / 2.4) - 0.055)
            enc = B.floor(enc * 255.0 + 0.5) / 255.0
            return B.select(enc <= 0.04045, enc / 12.92, B.pow((enc + 0.055) / 1.055, 2.4))
        top = 2.0 ** fmt.bits - 1
        return B.floor(x * top + 0.5) / top
    if fmt.kind == "float":
        return B.cast(B.cast(x, T.f16), T.f32) if fmt.bits == 16 else x
    lo, hi = _int_range(fmt)
    return B.min(B.max(B.cast(B.cast(x, T.i64), T.f32), lo), hi)


_VEC4 = MatrixType(4, 1, 1, T.f32)


class TextureType(NdarrayType):
    """The annotation `ti.types.texture(num_dimensions=d)`."""

    kernel_value = TextureSampler

    def __init__(self, num_dimensions):
        NdarrayType.__init__(self, dtype=_VEC4, ndim=num_dimensions, needs_grad=False)
        self.num_dimensions = num_dimensions


class RWTextureType(NdarrayType):
    """The annotation `ti.types.rw_texture(num_dimensions=d, fmt=..., lod=0)`."""

    def __init__(self, num_dimensions, fmt=None, lod=0):
        if not isinstance(fmt, _Format):
            raise TypeError(f"ti.types.rw_texture: fmt is a ti.Format (ti.Format.r32f, "
                            f"ti.Format.rgba8, ...), got {fmt!r}")
        NdarrayType.__init__(self, dtype=_VEC4, ndim=num_dimensions, needs_grad=False)
        self.num_dimensions = num_dimensions
        self.fmt = fmt
        self.lod = lod
        self.kernel_value = type("RWTextureAccessor", (RWTextureAccessor,), {"fmt": fmt})


def texture(num_dimensions):
    return TextureType(num_dimensions)


def rw_texture(num_dimensions, fmt, lod=0):
    return RWTextureType(num_dimensions, fmt, lod)
