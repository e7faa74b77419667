"""ti.Texture on the CPU: sampling, fetching, loads and stores against a NumPy reference."""
import numpy as np
import pytest

import fluxion as ti


def _bilinear_repeat(tex, uv):
    """Reference: linear filtering between the nearest texels (centres at (k + .5) / n),
    coordinates wrapped (repeat), over any number of dimensions."""
    shape = tex.shape[:-1]
    out = np.zeros(4)
    pos = []
    for u, n in zip(uv, shape):
        x = (u % 1.0) * n - 0.5
        k = int(np.floor(x))
        pos.append(((k % n, 1.0 - (x - k)), ((k + 1) % n, x - k)))
    for corner in np.ndindex(*(2,) * len(shape)):
        w = 1.0
        idx = []
        for d, c in enumerate(corner):
            i, wk = pos[d][c]
            idx.append(i)
            w *= wk
        out += w * tex[tuple(idx)]
    return out


@pytest.mark.parametrize("shape", [(16,), (8, 12), (4, 6, 5)])
def test_sample_lod_filters_linearly_with_repeat(shape):
    ti.init(arch=ti.cpu)
    rng = np.random.default_rng(len(shape))
    d = len(shape)
    texels = rng.random(shape + (4,)).astype(np.float32)
    tex = ti.Texture(ti.Format.rgba32f, shape)
    src = ti.Vector.ndarray(4, ti.f32, shape)
    src.from_numpy(texels)
    tex.from_ndarray(src)
    uvs = rng.uniform(-1.5, 2.5, size=(64, d)).astype(np.float32)
    uv_arr = ti.ndarray(ti.f32, (64, d))
    uv_arr.from_numpy(uvs)
    out = ti.Vector.ndarray(4, ti.f32, (64,))

    @ti.kernel
    def sample(t: ti.types.texture(num_dimensions=d), uv: ti.types.ndarray(),
               o: ti.types.ndarray()):
        for s in range(64):
            p = ti.Vector([uv[s, k] for k in ti.static(range(d))])
            o[s] = t.sample_lod(p, 0.0)

    sample(tex, uv_arr, out)
    want = np.array([_bilinear_repeat(texels.astype(np.float64), u.astype(np.float64))
                     for u in uvs])
    np.testing.assert_allclose(out.to_numpy(), want, rtol=2e-4, atol=2e-4)


def test_fetch_load_store_and_formats():
    ti.init(arch=ti.cpu)
    n = 8
    r32 = ti.Texture(ti.Format.r32f, (n, n))
    rgba8 = ti.Texture(ti.Format.rgba8, (n, n))

    @ti.kernel
    def paint(t: ti.types.rw_texture(num_dimensions=2, fmt=ti.Format.r32f, lod=0),
              c: ti.types.rw_texture(num_dimensions=2, fmt=ti.Format.rgba8, lod=0)):
        for i, j in ti.ndrange(n, n):
            t.store(ti.Vector([i, j]), ti.Vector([i * 10.0 + j, 7.0, 7.0, 7.0]))
            c.store(ti.Vector([i, j]), ti.Vector([i / 7.0, 0.3, 1.7, -2.0]))

    got = ti.Vector.field(4, ti.f32, shape=(n, n))
    got8 = ti.Vector.field(4, ti.f32, shape=(n, n))

    @ti.kernel
    def read(t: ti.types.texture(num_dimensions=2),
             c: ti.types.rw_texture(num_dimensions=2, fmt=ti.Format.rgba8, lod=0)):
        for i, j in got:
            got[i, j] = t.fetch(ti.Vector([i, j]), 0)
            got8[i, j] = c.load(ti.Vector([i, j]))

    paint(r32, rgba8)
    read(r32, rgba8)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    # a one-channel format keeps red; the others read 0, alpha 1
    want = np.stack([i * 10.0 + j, 0 * i, 0 * i, 1 + 0 * i], axis=-1)
    np.testing.assert_array_equal(got.to_numpy(), want)
    # 8-bit channels: clamped to [0, 1], 256 levels, a half rounded up (0.3 * 255 is 76.5 in
    # f32, the kernel's type)
    q = lambda v: np.floor(np.float32(v) * np.float32(255) + np.float32(0.5)) / 255  # noqa: E731
    want8 = np.stack([q(i.astype(np.float32) / np.float32(7.0)), np.full((n, n), q(0.3)),
                      np.ones((n, n)), np.zeros((n, n))], axis=-1)
    np.testing.assert_allclose(got8.to_numpy(), want8, atol=1e-6)


def test_from_field_and_images_round_trip():
    ti.init(arch=ti.cpu)
    PIL = pytest.importorskip("PIL.Image")
    w, h = 6, 4
    f = ti.Vector.field(2, ti.f32, shape=(w, h))
    vals = np.random.default_rng(1).random((w, h, 2)).astype(np.float32)
    f.from_numpy(vals)
    tex = ti.Texture(ti.Format.rg16f, (w, h))
    tex.from_field(f)
    t = tex.to_numpy()
    np.testing.assert_array_equal(t[..., :2], vals.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(t[..., 2:], np.broadcast_to([0.0, 1.0], (w, h, 2)))

    rgb = np.random.default_rng(2).integers(0, 256, (h, w, 3)).astype(np.uint8)
    img = PIL.fromarray(rgb)
    tex8 = ti.Texture(ti.Format.rgba8, (w, h))
    tex8.from_image(img)
    # as the original: the image turned a quarter counter-clockwise (PIL's rotate(90)), so
    # texel (x, y) holds the pixel of row y, column w - 1 - x
    np.testing.assert_allclose(tex8.to_numpy()[..., :3], np.rot90(rgb, 1) / 255.0, atol=1e-6)
    assert tex8.to_numpy()[2, 0, 0] == np.float32(rgb[0, w - 3, 0] / 255.0)
    back = np.asarray(tex8.to_image())
    np.testing.assert_array_equal(back, rgb)
    with pytest.raises(ValueError, match="rgba8"):
        tex.to_image()


def test_out_of_range_fetch_clamps_or_raises_in_debug():
    ti.init(arch=ti.cpu)
    tex = ti.Texture(ti.Format.r32f, (4,))
    tex.arr[:, 0] = [1, 2, 3, 4]
    out = ti.field(ti.f32, shape=2)

    @ti.kernel
    def edge(t: ti.types.texture(num_dimensions=1)):
        out[0] = t.fetch(ti.Vector([-3]), 0).r
        out[1] = t.fetch(ti.Vector([9]), 0).r

    edge(tex)
    np.testing.assert_array_equal(out.to_numpy(), [1, 4])
    ti.init(arch=ti.cpu, debug=True)
    tex = ti.Texture(ti.Format.r32f, (4,))
    out = ti.field(ti.f32, shape=2)

    @ti.kernel
    def edge2(t: ti.types.texture(num_dimensions=1)):
        out[0] = t.fetch(ti.Vector([9]), 0).r

    with pytest.raises(Exception, match="[Oo]ut of bound"):
        edge2(tex)


def test_bad_format_is_a_clear_error():
    ti.init(arch=ti.cpu)
    with pytest.raises(TypeError, match="ti.Format"):
        ti.Texture("rgba8", (4, 4))
    with pytest.raises(TypeError, match="ti.Format"):
        ti.types.rw_texture(num_dimensions=2, fmt=None)
