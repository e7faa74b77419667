"""ti.GUI discs are drawn as the original system draws them: centred at pos * resolution (not
snapped to a pixel), each pixel at integer coordinates (i, j) taking the colour with coverage
clamp(r - distance, 0, 1), blended disc after disc. Small particles (radius 0.5 to 3) are where
this shows: a radius-0.5 dot is faint, not a whole pixel."""
import numpy as np
import pytest

pytest.importorskip("PIL")

import fluxion as ti  # noqa: E402


def reference(res, bg, pos, radii, colors):
    """A disc at a time, a pixel at a time, in float (x right, y up), like the original."""
    w, h = res
    img = np.empty((w, h, 3))
    img[:] = [(bg >> 16) & 255, (bg >> 8) & 255, bg & 255]
    for (x, y), r, c in zip(pos, radii, colors):
        cx, cy = x * w, y * h
        rgb = np.array([(c >> 16) & 255, (c >> 8) & 255, c & 255], float)
        for i in range(max(0, int(np.ceil(cx - r))), min(int(np.floor(cx + r)), w - 1) + 1):
            for j in range(max(0, int(np.ceil(cy - r))), min(int(np.floor(cy + r)), h - 1) + 1):
                a = min(max(r - np.hypot(cx - i, cy - j), 0.0), 1.0)
                img[i, j] += a * (rgb - img[i, j])
    return img


def scene(seed=3, n=400):
    rng = np.random.default_rng(seed)
    pos = rng.random((n, 2))
    pos[: n // 4] = 0.5 + 0.03 * rng.random((n // 4, 2))    # a dense clump: many overlaps
    pos[-5:] = [[0.0, 0.0], [1.0, 1.0], [-0.01, 0.5], [0.5, 1.02], [0.999, 0.001]]  # edges
    radii = rng.choice([0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.7, 3.0], n)
    colors = rng.integers(0, 1 << 24, n)
    return pos, radii, colors


def test_small_discs_match_the_reference_rule():
    pos, radii, colors = scene()
    res, bg = (64, 48), 0x203040
    gui = ti.GUI("d", res=res, background_color=bg, show_gui=False)
    # in several calls, with per-disc radii and colours, as a simulation's particles
    for k in range(0, len(pos), 100):
        gui.circles(pos[k:k + 100], radius=radii[k:k + 100], color=colors[k:k + 100])
    got = gui.get_image()[..., :3] * 255
    ref = reference(res, bg, pos, radii, colors)
    # the frame is float32 between calls, as the original's (it was 8-bit, with a step of
    # rounding per blend): only float rounding remains
    assert np.abs(got - ref).max() <= 1e-3


@pytest.mark.parametrize("r, expected", [(0.5, 128), (1.0, 255), (0.25, 64)])
def test_a_dot_on_a_pixel_has_the_coverage_of_its_radius(r, expected):
    gui = ti.GUI("d", res=(16, 16), show_gui=False)
    gui.circle((0.5, 0.5), color=0xFFFFFF, radius=r)          # centred on pixel (8, 8)
    img = np.rint(gui.get_image()[..., :3] * 255).astype(int)
    assert tuple(img[8, 8]) == (expected,) * 3
    img[8, 8] = 0
    assert not img.any()                                      # nothing else is touched


def test_same_frame_as_the_original_system():
    taichi = pytest.importorskip("taichi")
    pos, radii, colors = scene(seed=5, n=200)

    def draw(mod):
        gui = mod.GUI("d", res=(48, 40), background_color=0x102030, show_gui=False)
        gui.circles(pos[:100], radius=radii[:100], color=colors[:100])
        gui.circles(pos[100:], radius=1.5, color=0xFFAA00)
        return np.asarray(gui.get_image())[..., :3]

    taichi.init(arch=taichi.cpu)
    theirs = draw(taichi)
    ours = draw(ti)
    assert np.abs(ours - theirs).max() <= 1.0 / 255 + 1e-6


@pytest.mark.parametrize("compiled", [True, False], ids=["kernel", "numpy"])
def test_both_disc_rasterizers_match_the_reference_rule(compiled, monkeypatch):
    # discs run as a fluxion kernel on a CPU program, in NumPy elsewhere: each is held to
    # the reference, with overlaps (order matters), per-disc colours and radii, discs off
    # the frame, and non-finite ones (skipped)
    from fluxion.gui import kernels
    if compiled and not kernels.usable():
        pytest.skip("the kernel is used on a CPU program only")
    monkeypatch.setattr(kernels, "usable", lambda: compiled)
    pos, radii, colors = scene(seed=9, n=600)
    pos[7], radii[8] = [np.nan, 0.5], np.inf
    res, bg = (53, 41), 0x0A0B0C
    gui = ti.GUI("d", res=res, background_color=bg, show_gui=False)
    gui.circles(pos[:300], radius=radii[:300], color=colors[:300])
    gui.circles(pos[300:], radius=1.5, color=0x33CCFF)
    got = gui.get_image()[..., :3] * 255
    keep = np.isfinite(pos).all(axis=1) & np.isfinite(radii)
    cols = np.concatenate([colors[:300], np.full(300, 0x33CCFF)])
    r = np.concatenate([radii[:300], np.full(300, 1.5)])
    ref = reference(res, bg, pos[keep], r[keep], cols[keep])
    assert np.abs(got - ref).max() <= 1e-3


def test_discs_on_a_program_of_f64_defaults():
    # the kernel's arithmetic is float32 whatever default_fp says
    ti.init(arch=ti.cpu, default_fp=ti.f64, default_ip=ti.i64)
    pos, radii, colors = scene(seed=4, n=300)
    res, bg = (40, 30), 0x102030
    gui = ti.GUI("d", res=res, background_color=bg, show_gui=False)
    gui.circles(pos, radius=radii, color=colors)
    ref = reference(res, bg, pos, radii, colors)
    assert np.abs(gui.get_image()[..., :3] * 255 - ref).max() <= 1e-3


def test_a_gui_drawn_before_init_does_not_initialize_the_program():
    from fluxion.runtime import program
    ti.reset()
    pos, radii, colors = scene(seed=6, n=100)
    gui = ti.GUI("d", res=(32, 24), show_gui=False)
    gui.circles(pos, radius=radii, color=colors)
    assert not program._state.initialized
    ref = reference((32, 24), 0, pos, radii, colors)
    assert np.abs(gui.get_image()[..., :3] * 255 - ref).max() <= 1e-3


@pytest.mark.parametrize("kind", ["uint32", "int64_high_bits", "int16", "list", "one_int",
                                  "float_rgb", "palette", "f64_positions"])
def test_the_kernel_reads_colours_and_positions_as_the_reference(kind):
    # the kernel takes integer colours as they are (their low 24 bits) and normalized
    # float32 positions; every form of colour must give the reference rule's picture
    from fluxion.gui import kernels
    if not kernels.usable():
        pytest.skip("the kernel is used on a CPU program only")
    pos, radii, colors = scene(seed=11, n=300)
    ref_colors = colors
    kw = {"color": colors}
    if kind == "uint32":
        kw["color"] = colors.astype(np.uint32)
    elif kind == "int64_high_bits":
        kw["color"] = colors + (np.arange(len(colors)) << 40) - (1 << 62)
    elif kind == "int16":
        kw["color"] = (colors & 0x7FFF).astype(np.int16)
        ref_colors = colors & 0x7FFF
    elif kind == "list":
        kw["color"] = [int(c) for c in colors]
    elif kind == "one_int":
        kw["color"] = 0x12AB34 | (7 << 30)
        ref_colors = np.full(len(colors), 0x12AB34)
    elif kind == "float_rgb":
        rgb = np.stack([(colors >> 16) & 255, (colors >> 8) & 255, colors & 255], 1) / 255
        kw["color"] = rgb
    elif kind == "palette":
        kw["palette"] = [0x102030, 0xFFEEDD, 0x00FF7F]
        kw["palette_indices"] = np.arange(len(colors)) % 3
        ref_colors = np.array(kw["palette"])[kw["palette_indices"]]
    if kind != "f64_positions":
        pos = pos.astype(np.float32)
    res, bg = (50, 37), 0x0A0B0C
    gui = ti.GUI("d", res=res, background_color=bg, show_gui=False)
    gui.circles(pos, radius=radii, **kw)
    ref = reference(res, bg, pos, radii, ref_colors)
    assert np.abs(gui.get_image()[..., :3] * 255 - ref).max() <= 1e-3


def test_colour_counts_are_checked_before_drawing():
    gui = ti.GUI("d", res=(8, 8), show_gui=False)
    with pytest.raises(ValueError):
        gui.circles(np.full((3, 2), 0.5), color=np.array([1, 2], np.uint32))
    with pytest.raises(ValueError):
        gui.circles(np.full((3, 2), 0.5), color=np.array([True, False, True]))
