"""ti.ui (GGUI) headless: the rasteriser against pictures computed here with numpy (coverage of
triangles, discs and lines, a sphere's silhouette and depth, Lambert shading), the camera's
matrices against what they must do to points, input replayed into events and widgets."""
import importlib
import math
import warnings

import numpy as np
import pytest

pytest.importorskip("PIL")

import fluxion as ti  # noqa: E402
from fluxion.ui import imgui  # noqa: E402

W, H = 64, 48
EPS = 1e-3   # pixel centres this close to an edge may fall either way (float32 rounding)


def window(res=(W, H)):
    return ti.ui.Window("test", res, show_window=False)


def centres(w=W, h=H):
    i, j = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5, indexing="ij")
    return i, j


def rgb(win):
    return win.get_image_buffer_as_numpy()[:, :, :3]


def edge(a, b, x, y):
    return (b[0] - a[0]) * (y - a[1]) - (b[1] - a[1]) * (x - a[0])


def test_triangle_covers_the_pixel_centres_inside_it():
    win = window()
    c = win.get_canvas()
    c.set_background_color((0.0, 0.0, 1.0))
    tri = np.array([[0.1, 0.15], [0.83, 0.3], [0.35, 0.9]], np.float32)
    c.triangles(tri, color=(1.0, 0.5, 0.0))
    img = rgb(win)
    x, y = centres()
    p = tri.astype(np.float64) * [W, H]
    e = np.stack([edge(p[1], p[2], x, y), edge(p[2], p[0], x, y), edge(p[0], p[1], x, y)])
    inside, sure = (e >= 0).all(0), (np.abs(e) > EPS).all(0)
    assert inside.sum() > 300
    np.testing.assert_array_equal(img[inside & sure], np.tile([1.0, 0.5, 0.0], ((inside & sure).sum(), 1)))
    np.testing.assert_array_equal(img[~inside & sure], np.tile([0.0, 0.0, 1.0], ((~inside & sure).sum(), 1)))


def test_triangle_colours_are_interpolated_barycentrically():
    win = window()
    tri = np.array([[0.05, 0.05], [0.95, 0.1], [0.4, 0.95]], np.float32)
    cols = np.eye(3, dtype=np.float32)
    # indexed: the same triangle, its vertices listed in another order
    win.get_canvas().triangles(tri[[2, 0, 1]], indices=np.array([1, 2, 0], np.int32),
                               per_vertex_color=cols[[2, 0, 1]])
    img = rgb(win)
    x, y = centres()
    p = tri.astype(np.float64) * [W, H]
    area = edge(p[0], p[1], p[2][0], p[2][1])
    bary = np.stack([edge(p[1], p[2], x, y), edge(p[2], p[0], x, y), edge(p[0], p[1], x, y)]) / area
    inside = (bary > 1e-3).all(0)
    np.testing.assert_allclose(img[inside], bary.transpose(1, 2, 0)[inside], atol=2e-5)


def test_circles_cover_the_pixels_within_their_radius_the_last_on_top():
    win = window()
    c = win.get_canvas()
    centers = np.array([[0.3, 0.5], [0.45, 0.55], [0.9, 0.1]], np.float32)
    c.circles(centers, radius=0.15, per_vertex_color=np.array(
        [[1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32))
    img = rgb(win)
    x, y = centres()
    expect = np.zeros((W, H, 3))
    # a fraction of the height in both directions: Taichi's Circles_vk.vert offsets a
    # corner by 2 r in clip space's y and 2 r h / w in its x (48x64: not the width)
    r = 0.15 * H
    for k, (cx, cy) in enumerate(centers.astype(np.float64) * [W, H]):
        d = np.hypot(x - cx, y - cy)
        expect[d <= r] = np.eye(3)[k]
    sure = np.ones((W, H), bool)
    for cx, cy in centers.astype(np.float64) * [W, H]:
        sure &= np.abs(np.hypot(x - cx, y - cy) - r) > EPS
    np.testing.assert_array_equal(img[sure], expect[sure])


def test_a_dot_smaller_than_a_pixel_still_shows():
    win = window()
    win.get_canvas().circles(np.array([[0.5, 0.5]], np.float32), radius=0.001, color=(1, 1, 1))
    img = rgb(win)
    assert img[W // 2, H // 2].tolist() == [1, 1, 1] and img.sum() == 3


def test_a_line_covers_the_pixels_within_half_its_width():
    win = window()
    ends = np.array([[0.1, 0.2], [0.8, 0.7]], np.float32)
    win.get_canvas().lines(ends, width=0.1, color=(0.0, 1.0, 0.0))
    img = rgb(win)
    x, y = centres()
    a, b = ends.astype(np.float64) * [W, H]
    d = b - a
    t = np.clip(((x - a[0]) * d[0] + (y - a[1]) * d[1]) / d.dot(d), 0, 1)
    dist = np.hypot(x - a[0] - t * d[0], y - a[1] - t * d[1])
    half = 0.05 * H                   # width: a fraction of the height
    sure = np.abs(dist - half) > EPS
    np.testing.assert_array_equal(img[:, :, 1][sure], (dist <= half)[sure].astype(np.float32))


def test_set_image_is_indexed_x_y_with_y_up_like_ti_gui():
    img = np.zeros((W, H, 3), np.float32)
    img[3, 1] = [1, 0, 0]             # near the bottom-left corner
    img[W - 2, H - 3] = [0, 1, 0]
    win = window()
    win.get_canvas().set_image(img)
    np.testing.assert_array_equal(rgb(win), img)
    gui = ti.GUI("ref", (W, H), show_gui=False)
    gui.set_image(img)
    np.testing.assert_array_equal(np.asarray(gui.get_image())[:, :, :3], img)
    # a field, integers, a grey scale, and an image of another size (stretched)
    f = ti.field(ti.u8, shape=(W // 2, H // 2))
    f.from_numpy(np.arange(W // 2 * H // 2, dtype=np.uint8).reshape(W // 2, H // 2))
    win.get_canvas().set_image(f)
    expect = np.repeat(np.repeat(f.to_numpy() / 255.0, 2, 0), 2, 1)
    np.testing.assert_allclose(rgb(win), np.repeat(expect[:, :, None], 3, 2), atol=1e-6)


def test_save_image_writes_the_frame_top_row_first(tmp_path):
    from PIL import Image
    win = window()
    img = np.random.default_rng(0).random((W, H, 3)).astype(np.float32)
    win.get_canvas().set_image(img)
    win.save_image(str(tmp_path / "f.png"))
    png = np.asarray(Image.open(tmp_path / "f.png"), np.float64)
    assert png.shape == (H, W, 3)
    np.testing.assert_allclose(png[::-1].transpose(1, 0, 2), np.round(img * 255), atol=1)


# -- the camera ---------------------------------------------------------------------------------
def test_view_matrix_puts_the_eye_at_the_origin_looking_down_minus_z():
    cam = ti.ui.Camera()
    eye, target = np.array([1.0, 2.0, 3.0]), np.array([-0.5, 0.3, 0.2])
    cam.position(*eye)
    cam.lookat(*target)
    cam.up(0, 1, 0)
    # as Taichi returns it: float32, transposed (GLM's column-major memory read as rows)
    v = np.asarray(cam.get_view_matrix(), np.float64).T
    h = lambda p: (v @ np.append(p, 1.0))[:3]
    np.testing.assert_allclose(h(eye), 0, atol=1e-6)
    np.testing.assert_allclose(h(target), [0, 0, -np.linalg.norm(target - eye)], atol=1e-6)
    np.testing.assert_allclose(v[:3, :3] @ v[:3, :3].T, np.eye(3), atol=1e-6)   # a rotation
    assert np.linalg.det(v[:3, :3]) > 0
    assert (v[:3, :3] @ [0, 1, 0])[1] > 0 and abs((v[:3, :3] @ [0, 1, 0])[0]) < 1e-6


def test_perspective_maps_the_frustum_onto_the_cube():
    cam = ti.ui.Camera()
    cam.fov(60)
    cam.z_near(0.5)
    cam.z_far(50.0)
    aspect = 1.5
    # as Taichi returns it: transposed, and depth reversed into [0, 1] (near 1, far 0)
    p = np.asarray(cam.get_projection_matrix(aspect), np.float64).T
    ndc = lambda q: (p @ np.append(q, 1.0))[:3] / (p @ np.append(q, 1.0))[3]
    t = math.tan(math.radians(30))
    for d in (0.5, 3.0, 50.0):
        corner = ndc([d * t * aspect, d * t, -d])
        np.testing.assert_allclose(corner[:2], [1, 1], atol=1e-6)
    assert ndc([0, 0, -0.5])[2] == pytest.approx(1, abs=1e-6)
    assert ndc([0, 0, -50])[2] == pytest.approx(0, abs=1e-6)
    cam.projection_mode(ti.ui.ProjectionMode.Orthogonal)
    cam.left(-2)
    cam.right(4)
    o = np.asarray(cam.get_projection_matrix(aspect), np.float64).T
    np.testing.assert_allclose(o @ [4, 1, -50, 1], [1, 1, 0, 1], atol=1e-6)
    np.testing.assert_allclose(o @ [-2, -1, -0.5, 1], [-1, -1, 1, 1], atol=1e-6)


def test_camera_matrices_are_the_values_of_taichis_own_test():
    # Taichi's tests/python/test_ggui.py, test_get_camera_view_and_projection_matrix
    cam = ti.ui.Camera()
    cam.position(0, 0, 3)
    cam.lookat(0, 0, 0)
    view, proj = cam.get_view_matrix(), cam.get_projection_matrix(1080 / 720)
    for i in range(4):
        assert abs(view[i, i] - 1) <= 1e-5
    assert abs(view[3, 2] + 3) <= 1e-5
    assert abs(proj[0, 0] - 1.6094756) <= 1e-5
    assert abs(proj[1, 1] - 2.4142134) <= 1e-5
    assert abs(proj[2, 2] - 1.0001000e-4) <= 1e-5
    assert abs(proj[2, 3] + 1.0000000) <= 1e-5
    assert abs(proj[3, 2] - 1.0001000e-1) <= 1e-5


def _sphere_scene(win, light=None):
    scene = win.get_scene()
    cam = ti.ui.Camera()
    cam.position(0.2, 0.1, 3.0)
    cam.lookat(0.2, 0.1, 0.0)
    cam.fov(40)
    scene.set_camera(cam)
    scene.ambient_light((0.25, 0.5, 1.0))
    if light is not None:
        scene.point_light(*light)
    scene.particles(SPHERES, radius=0.6, per_vertex_radius=RADII, color=(0.8, 0.6, 0.4))
    win.get_canvas().scene(scene)
    return cam


# one in the middle, one far off the axis and partly off the frame (its outline an ellipse)
SPHERES = np.array([[0.0, 0.0, 0.0], [1.45, 1.0, 0.3]], np.float32)
RADII = np.array([0.6, 0.3], np.float32)


def _nearest_hits(eye, d):
    """Per ray: the nearest sphere's entry t, its centre and radius, and how far each ray is
    from grazing (|discriminant|, small: either way)."""
    best_t = np.full(d.shape[:-1], np.inf)
    centre = np.zeros(d.shape)
    radius = np.ones(d.shape[:-1])
    margin = np.full(d.shape[:-1], np.inf)
    for c, r in zip(SPHERES.astype(np.float64), RADII.astype(np.float64)):
        oc = eye - c
        b = (oc * d).sum(-1)
        q = b * b - (oc.dot(oc) - r * r)
        t = np.where(q >= 0, -b - np.sqrt(np.maximum(q, 0)), np.inf)
        near = t < best_t
        best_t[near], centre[near], radius[near] = t[near], c, r
        margin = np.minimum(margin, np.abs(q))
    return best_t, centre, radius, margin


def _rays(w, h, eye, fov):
    """Per pixel, the unit ray from the eye (which looks down -z, y up) through its centre."""
    x, y = centres(w, h)
    t = math.tan(math.radians(fov) / 2)
    d = np.stack([(2 * x / w - 1) * t * w / h, (2 * y / h - 1) * t, -np.ones_like(x)], -1)
    return d / np.linalg.norm(d, axis=-1, keepdims=True)


def test_a_particle_is_a_sphere_with_its_silhouette_and_depth():
    win = window()
    _sphere_scene(win)
    img, depth = rgb(win), win.get_depth_buffer_as_numpy()
    eye = np.array([0.2, 0.1, 3.0])
    d = _rays(W, H, eye, 40)
    t, _, _, margin = _nearest_hits(eye, d)
    hit = np.isfinite(t)
    sure = margin > 1e-3
    covered = depth > 0
    assert hit[-8:, -8:].sum() > 20                  # the far sphere shows in its corner
    np.testing.assert_array_equal(covered[sure], hit[sure])
    # ambient only: the colour times the ambient light, everywhere on the sphere
    np.testing.assert_allclose(img[covered], np.tile([0.2, 0.3, 0.4], (covered.sum(), 1)),
                               atol=1e-6)
    # depth in [0, 1], reversed as Taichi's: the view depth w of the nearest hit through
    # 0.1 (near, 1) and 1000 (far, 0)
    w = -t * d[..., 2]
    n, f = 0.1, 1000.0
    expect = n * (f / w - 1) / (f - n)
    m = covered & sure
    np.testing.assert_allclose(depth[m], expect[m], rtol=0, atol=2e-6)


def test_lambert_and_highlight_of_a_point_light_on_the_sphere():
    win = window()
    light_pos, light_col = np.array([2.0, 3.0, 4.0]), np.array([0.9, 0.8, 0.7])
    _sphere_scene(win, (tuple(light_pos), tuple(light_col)))
    img = rgb(win)
    eye = np.array([0.2, 0.1, 3.0])
    d = _rays(W, H, eye, 40)
    t, centre, radius, margin = _nearest_hits(eye, d)
    m = np.isfinite(t) & (margin > 1e-3)
    p = eye + np.where(m, t, 0)[..., None] * d
    nrm = (p - centre) / radius[..., None]
    ld = light_pos - p
    ld /= np.linalg.norm(ld, axis=-1, keepdims=True)
    v = -d
    ndl = (nrm * ld).sum(-1)
    hv = ld + v
    hv /= np.linalg.norm(hv, axis=-1, keepdims=True)
    color = np.array([0.8, 0.6, 0.4])
    lit = (ndl > 0)[..., None]
    expect = color * [0.25, 0.5, 1.0] + lit * (color * light_col * ndl[..., None]
                                              + light_col * 0.25 * np.maximum((nrm * hv).sum(-1), 0)[..., None] ** 32)
    np.testing.assert_allclose(img[m], np.clip(expect[m], 0, 1), atol=2e-4)


def _mesh_picture(order, transforms=None, shift=(0, 0, 0)):
    win = window()
    scene = win.get_scene()
    cam = ti.ui.Camera()
    cam.position(0, 0, 4)
    cam.lookat(0, 0, 0)
    scene.set_camera(cam)
    scene.ambient_light((1, 1, 1))
    near = np.array([[-1, -1, 0.5], [1, -1, 0.5], [0, 1, 0.5]], np.float32) + shift
    far = np.array([[-1, 1, -0.5], [1, 1, -0.5], [0, -1, -0.5]], np.float32) + shift
    meshes = [(near, (1, 0, 0)), (far, (0, 1, 0))]
    for k in order:
        v, col = meshes[k]
        if transforms is None:
            scene.mesh(v, color=col)
        else:
            scene.mesh_instance(v, color=col, transforms=transforms)
    win.get_canvas().scene(scene)
    return rgb(win), win.get_depth_buffer_as_numpy()


def test_the_depth_test_keeps_the_nearer_triangle_whatever_the_order():
    a, da = _mesh_picture([0, 1])
    b, db = _mesh_picture([1, 0])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(da, db)
    assert (a[:, :, 0] == 1).sum() > 100 and (a[:, :, 1] == 1).sum() > 50
    # the near triangle's depth: view depth 3.5 everywhere on it
    n, f = 0.1, 1000.0
    red = a[:, :, 0] == 1
    np.testing.assert_allclose(da[red], n * (f / 3.5 - 1) / (f - n), atol=1e-6)


def test_mesh_instance_transforms_move_the_mesh():
    m = np.tile(np.eye(4, dtype=np.float32), (1, 1, 1))
    m[0, :3, 3] = [0.3, -0.2, 0.1]
    a, da = _mesh_picture([0, 1], transforms=m)
    b, db = _mesh_picture([0, 1], shift=(0.3, -0.2, 0.1))
    np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(da, db, atol=1e-6)


def test_computed_normals_are_the_averaged_face_normals():
    from fluxion.ui import raster3d
    rng = np.random.default_rng(1)
    pos = rng.random((6, 3)).astype(np.float32)
    idx = np.array([0, 1, 2, 2, 1, 3, 3, 4, 5, 0, 2, 5], np.int32)
    out = np.zeros_like(pos)
    raster3d.normals(pos, idx, out)
    expect = np.zeros((6, 3))
    for t in idx.reshape(-1, 3):
        a, b, c = pos[t].astype(np.float64)
        for k in t:
            expect[k] += np.cross(b - a, c - a)
    expect /= np.linalg.norm(expect, axis=1, keepdims=True)
    np.testing.assert_allclose(out, expect, atol=1e-5)


# -- input --------------------------------------------------------------------------------------
def test_constants_are_taichis():
    tc = importlib.import_module("taichi.ui.constants")
    for name in ("SHIFT", "ALT", "CTRL", "ESCAPE", "RETURN", "TAB", "BACKSPACE", "SPACE", "UP",
                 "DOWN", "LEFT", "RIGHT", "CAPSLOCK", "LMB", "MMB", "RMB", "PRESS", "RELEASE"):
        assert getattr(ti.ui, name) == getattr(tc, name), name


def test_events_replayed():
    win = window()
    assert win.running and win.event is None
    assert not win.get_event() and win.get_events() == []
    win._push_event(ti.ui.PRESS, "A", pos=(0.25, 0.75))
    win._push_event(ti.ui.PRESS, ti.ui.LMB)
    win._push_event(ti.ui.RELEASE, "a")
    assert win.is_pressed(ti.ui.LMB, "x") and not win.is_pressed("a")
    assert win.get_cursor_pos() == (0.25, 0.75)
    # Taichi's window_base.cpp: a tagged get_event takes the first event of its type and
    # leaves the others queued; get_events(tag) takes those of its type only
    assert win.get_event(ti.ui.RELEASE) and win.event.key == "a"
    assert not win.get_event(ti.ui.RELEASE) and win.event.key == "a"
    assert [(e.type, e.key) for e in win.get_events()] == [("Press", "a"), ("Press", "LMB")]
    assert win.get_events() == []
    win._push_event(ti.ui.PRESS, ti.ui.ESCAPE)
    win._push_event(ti.ui.RELEASE, ti.ui.ESCAPE)
    win._push_event(ti.ui.PRESS, "b")
    assert win.get_event() and (win.event.type, win.event.key) == ("Press", "Escape")
    assert [(e.type, e.key) for e in win.get_events(ti.ui.PRESS)] == [("Press", "b")]
    assert [(e.type, e.key) for e in win.get_events(ti.ui.RELEASE)] == [("Release", "Escape")]
    assert win.get_events() == []
    with pytest.raises(ValueError):
        win.get_events("Motion")
    win.running = False
    assert not win.running


def test_camera_follows_the_keys():
    win = window()
    cam = ti.ui.Camera()
    cam.position(0, 0, 0)
    cam.lookat(0, 0, -1)
    cam.track_user_inputs(win, movement_speed=1.0, hold_key=ti.ui.RMB)
    win._push_event(ti.ui.PRESS, "w")
    cam.last_time -= 1 / 60                        # one frame of 1/60 s later
    cam.track_user_inputs(win, movement_speed=1.0, hold_key=ti.ui.RMB)
    assert cam.curr_position[2] < -0.9 and abs(cam.curr_position[0]) < 1e-9
    np.testing.assert_allclose(cam.curr_lookat - cam.curr_position, [0, 0, -1], atol=1e-9)


def _rect_of_row(panel_xy, row, w=W * 4, h=H * 4):
    """Pixels (x, y down) of a sub-window's row, from its layout (see fluxion/ui/imgui.py)."""
    x0, y0 = int(panel_xy[0] * w), int(panel_xy[1] * h)
    return x0 + imgui.PAD, y0 + imgui.TITLE + imgui.PAD + row * (imgui.ROW + 2)


def _click(win, x, y):
    w, h = win.res
    pos = ((x + 0.5) / w, 1 - (y + 0.5) / h)
    win._push_event(ti.ui.PRESS, ti.ui.LMB, pos=pos)
    win._push_event(ti.ui.RELEASE, ti.ui.LMB, pos=pos)


def test_widgets_keep_their_values_headless_and_follow_replayed_clicks():
    win = window((W * 4, H * 4))
    gui = win.get_gui()

    def frame():
        with gui.sub_window("opts", 0.1, 0.1, 0.8, 0.8) as g:
            g.text("hello")
            out = (g.checkbox("on", False), g.slider_float("f", 0.25, 0.0, 2.0),
                   g.slider_int("i", 3, 0, 10), g.button("go"), g.color_edit_3("c", (0.1, 0.2, 0.3)))
        img = rgb(win).copy()
        win.show()
        return out, img

    (on, f, i, go, col), plain = frame()
    assert (on, f, i, go, col) == (False, 0.25, 3, False, (0.1, 0.2, 0.3))
    assert plain.max() > 0                         # the sub-window is drawn
    track = int((int(0.8 * W * 4) - 2 * imgui.PAD) * 0.62)
    x, y = _rect_of_row((0.1, 0.1), 1)
    _click(win, x + 2, y + 2)                      # the checkbox
    x, y = _rect_of_row((0.1, 0.1), 2)
    _click(win, x + int(0.75 * track), y + 2)      # the float slider, three quarters along
    x, y = _rect_of_row((0.1, 0.1), 4)
    _click(win, x + 2, y + 2)                      # the button
    (on, f, i, go, col), _ = frame()
    assert on and go and i == 3 and col == (0.1, 0.2, 0.3)
    assert f == pytest.approx(2.0 * (int(0.75 * track) + 0.5) / track, abs=1e-6)
    (on, f, i, go, col), _ = frame()               # the click was the last frame's
    assert not on and not go


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError):
        ti.ui.Window("x", (0, 10), show_window=False)
    win = window()
    with pytest.raises(ValueError):
        win.get_canvas().circles(np.zeros((4, 3), np.float32), radius=0.1)
    with pytest.raises(IndexError):
        win.get_canvas().triangles(np.zeros((3, 2), np.float32), indices=np.array([0, 1, 3]))
    with pytest.raises(ValueError):
        ti.ui.Camera().fov(180)


def test_repeated_index_pairs_draw_the_same_lines():
    ends = np.array([[0.1, 0.2], [0.8, 0.7], [0.5, 0.1], [0.5, 0.9]], np.float32)
    cols = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]], np.float32)
    pictures = []
    for idx in ([0, 1, 2, 3, 1, 2], [0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 1, 2, 1, 2]):
        win = window()
        win.get_canvas().lines(ends, width=0.05, indices=np.array(idx, np.int32),
                               per_vertex_color=cols)
        pictures.append(rgb(win))
    np.testing.assert_array_equal(*pictures)
    assert pictures[0].sum() > 50


def test_widgets_outside_a_sub_window_get_one_of_their_own():
    win = window((W * 4, H * 4))
    gui = win.get_gui()
    assert gui.slider_int("a", 4, 0, 9) == 4 and not gui.button("b")
    with gui.sub_window("next", 0.5, 0.5, 0.4, 0.4) as g:
        g.text("fine")
    assert rgb(win).max() > 0
    win.show()
    assert gui.checkbox("again", True)


def _crossing_scene():
    win = window()
    scene = win.get_scene()
    cam = ti.ui.Camera()
    cam.position(*EYE)
    cam.lookat(0, 0, 0)
    cam.fov(40)
    scene.set_camera(cam)
    scene.ambient_light((1, 1, 1))
    return win, scene


EYE = np.array([0.0, 0.0, 4.0])    # looking down -z, near plane 0.1 in front of it


def _screen(p, fov=40):
    """Pixel coordinates of points p (n, 3) seen from EYE (the pinhole camera's formula)."""
    q = p - EYE
    t = math.tan(math.radians(fov) / 2)
    return np.stack([(q[:, 0] / -q[:, 2] / (t * W / H) + 1) * W / 2,
                     (q[:, 1] / -q[:, 2] / t + 1) * H / 2], axis=1)


@pytest.mark.parametrize("crossing", [
    [[-1, -1, 0], [1, -1, 0], [1.5, 0.8, 4.5]],          # one corner behind: a quad is left
    [[1.5, 0.8, 4.5], [-1, -0.5, 6], [1, -1, 0]],        # two behind: a triangle is left
], ids=["one_behind", "two_behind"])
def test_a_mesh_crossing_the_camera_plane_shows_its_part_in_front_and_no_more(crossing):
    # one corner behind the eye, where the projection means nothing (w < 0): the triangle
    # is cut at the near plane. Every pixel it colours is one whose ray meets it in front
    # of the eye (without the cut, a renderer that projected the corner as if in front
    # painted 205 pixels off it), and every pixel well inside its visible part is coloured
    win, scene = _crossing_scene()
    crossing = np.array(crossing, np.float32)
    front = np.array([[-1.2, 0.4, 0], [-0.4, 0.4, 0], [-0.8, 1.0, 0]], np.float32)
    scene.mesh(crossing, color=(1, 0, 0))
    scene.mesh(front, color=(0, 1, 0))
    win.get_canvas().scene(scene)
    img = rgb(win)
    green = img[:, :, 1] > 0.5
    assert green.sum() > 20

    d = _rays(W, H, EYE, 40)
    a, b, c = crossing.astype(np.float64)
    n = np.cross(b - a, c - a)
    t = ((a - EYE) @ n) / (d @ n)                      # the ray's hit on the plane
    p = EYE + t[..., None] * d
    bary = np.min([np.cross(q1 - p, q2 - p) @ n / (n @ n)
                   for q1, q2 in ((b, c), (c, a), (a, b))], axis=0)
    depth = t * -d[..., 2]                             # view depth of the hit
    hit = (depth > 0.1 - 1e-3) & (bary >= -0.02)      # in front, inside (a pixel's slack)
    inside = (depth > 0.12) & (bary >= 0.02)
    red = (img[:, :, 0] > 0.5) & ~green
    assert not (red & ~hit).any(), f"{(red & ~hit).sum()} pixels smeared"
    assert (red | green)[inside].all(), f"{(~(red | green) & inside).sum()} pixels missing"
    assert inside.sum() > 100


def test_a_line_crossing_the_camera_plane_shows_its_part_in_front():
    win, scene = _crossing_scene()
    a, b = np.array([-0.5, -0.3, 0.0]), np.array([0.6, 0.4, 6.0])    # b behind the eye
    scene.lines(np.array([a, b], np.float32), width=3, color=(1, 1, 1))
    win.get_canvas().scene(scene)
    lit = rgb(win)[:, :, 0] > 0.5
    # its visible part ends at the near plane (view depth 0.1)
    s = (4.0 - 0.1 - a[2]) / (b[2] - a[2])
    p0, p1 = _screen(np.array([a, a + s * (b - a)]))
    x, y = centres()
    q = np.stack([x, y], -1)
    u = p1 - p0
    k = np.clip(((q - p0) @ u) / (u @ u), 0, 1)
    dist = np.linalg.norm(q - (p0 + k[..., None] * u), axis=-1)
    assert not (lit & (dist > 1.5 + 1)).any()           # nothing off the line
    assert lit[dist <= 0.5].all() and (dist <= 0.5).sum() > 20


def test_contour_is_the_field_through_matplotlibs_colormap():
    matplotlib = pytest.importorskip("matplotlib")
    win = window()
    f = ti.field(ti.f32, (W, H))
    x, y = centres()
    vals = (np.sin(x / 9) * np.cos(y / 7) * 3 + 1).astype(np.float32)
    f.from_numpy(vals)
    win.get_canvas().contour(f, cmap_name="viridis", normalize=True)
    norm = (vals - vals.min()) / (vals.max() - vals.min())
    want = matplotlib.colormaps["viridis"](norm)[:, :, :3]
    assert np.abs(rgb(win) - want).max() <= 1 / 255 + 1e-6
    with pytest.raises(ValueError):
        win.get_canvas().contour(ti.field(ti.f32, (4, 4, 4)))


def test_vector_field_draws_an_arrow_per_sample():
    # 11 x 11 cells of (1, 0), one arrow every 5 cells and at the last: arrows start at
    # x, y in {0, 0.5, 1}, shafts 0.3 long (the longest vector is scaled to `scale`), tips
    # a fifth of that, turned back by 30 degrees (of the original's pi, 3.14) either side
    res = 200
    win = window((res, res))
    v = ti.Vector.field(2, ti.f32, (11, 11))
    v.from_numpy(np.tile(np.array([1.0, 0.0], np.float32), (11, 11, 1)))
    win.get_canvas().vector_field(v, arrow_spacing=5, scale=0.3, width=0.01, color=(1, 1, 1))
    lit = rgb(win)[:, :, 0] > 0.5
    tip, turn = 0.06 * res, 30 / 180 * 3.14
    for x0 in (0.0, 0.5):
        i = x0 * res
        assert lit[int(i + 0.15 * res), 0] and lit[int(i + 0.15 * res), res // 2]   # shafts
        e, j = i + 0.3 * res, res // 2
        for s in (1, -1):       # the tip strokes, above and below the shaft near its end
            assert lit[int(e - 0.6 * tip * math.cos(turn)), int(j + s * 0.6 * tip * math.sin(turn))]
        assert not lit[int(i + 0.15 * res), j + 6]
    assert not lit[int(0.3 * res), int(0.25 * res)]        # between the rows of arrows


def test_spheres_hidden_in_a_dense_block_leave_the_nearest_on_top(monkeypatch):
    # a block of overlapping spheres, seen from the front (as mpm3d's particles): most are
    # hidden whole and skipped; each pixel must still show the sphere nearest along its ray,
    # at that sphere's depth (numpy, float64), except on silhouettes and near-ties
    from fluxion.ui import raster, raster3d
    occluded = []
    splat = raster3d.splat_particles

    def spy(*args):
        splat(*args)
        occluded.append(bool((np.asarray(args[-1]) != raster.NO_KEY).any()))
    monkeypatch.setattr(raster3d, "splat_particles", spy)
    w, h = 128, 96
    g = np.linspace(-0.6, 0.6, 7)
    centers = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    centers = centers + np.random.default_rng(1).uniform(-0.03, 0.03, centers.shape)
    order = np.random.default_rng(2).permutation(len(centers))     # drawn in no depth order
    centers = centers[order].astype(np.float32)
    colors = np.random.default_rng(3).uniform(0.2, 1, (len(centers), 3)).astype(np.float32)
    win = window((w, h))
    scene = win.get_scene()
    cam = ti.ui.Camera()
    cam.position(0.1, 0.2, 3.0)
    cam.lookat(0.1, 0.2, 0.0)
    cam.fov(40)
    scene.set_camera(cam)
    scene.ambient_light((1, 1, 1))
    scene.particles(centers, radius=0.25, per_vertex_color=colors)
    win.get_canvas().scene(scene)
    img, depth = rgb(win), win.get_depth_buffer_as_numpy()
    assert occluded == [True]
    eye = np.array([0.1, 0.2, 3.0])
    d = _rays(w, h, eye, 40)
    ts = []
    grazing = np.full((w, h), np.inf)
    for c in centers.astype(np.float64):
        oc = eye - c
        b = (oc * d).sum(-1)
        q = b * b - (oc.dot(oc) - 0.25 ** 2)
        ts.append(np.where(q >= 0, -b - np.sqrt(np.maximum(q, 0)), np.inf))
        grazing = np.minimum(grazing, np.abs(q))
    ts = np.array(ts)
    best = ts.argmin(0)
    t = ts.min(0)
    second = np.partition(ts, 1, axis=0)[1]
    with np.errstate(invalid="ignore"):         # (inf - inf where no sphere is hit)
        sure = (grazing > 1e-3) & (second - t > 1e-3)
    hit = np.isfinite(t)
    assert (sure & hit).sum() > 0.3 * w * h
    np.testing.assert_array_equal((depth > 0)[sure], hit[sure])
    m = sure & hit
    np.testing.assert_allclose(img[m], colors[best[m]], atol=1e-6)
    wv = -t * d[..., 2]
    n, f = 0.1, 1000.0
    np.testing.assert_allclose(depth[m], (n * (f / wv - 1) / (f - n))[m], atol=2e-6)


def test_set_image_channel_counts_and_dtypes_against_numpy():
    # Oracle: Taichi's staging rule read from its source (grey from 2-D arrays only, one and
    # two channels as red, and red and green, over 0, alpha ignored for display, integers
    # over 255), in NumPy.
    rng = np.random.default_rng(7)
    win = window()
    cases = [rng.random((W, H), dtype=np.float32),
             rng.random((W, H, 1), dtype=np.float32),
             rng.integers(0, 256, (W, H, 1), dtype=np.uint8),
             rng.random((W, H, 2), dtype=np.float32),
             rng.integers(0, 256, (W, H, 2), dtype=np.uint8),
             rng.random((W, H, 3)),
             rng.integers(0, 256, (W, H, 3), dtype=np.uint8),
             rng.integers(0, 256, (W, H, 4), dtype=np.uint8),
             rng.random((W, H, 4), dtype=np.float32)]
    for img in cases:
        x = img.astype(np.float64) / (255.0 if img.dtype == np.uint8 else 1.0)
        if x.ndim == 2:
            want = np.repeat(x[:, :, None], 3, 2)
        elif x.shape[2] < 3:
            want = np.concatenate([x, np.zeros((W, H, 3 - x.shape[2]))], 2)
        else:
            want = x[:, :, :3]
        win.get_canvas().set_image(img)
        np.testing.assert_allclose(rgb(win), want, atol=1e-6, err_msg=str((img.dtype, img.shape)))
    # fields: a scalar field is grey, a field of 1-vectors red (as its (w, h, 1) numpy)
    x = rng.random((W, H), dtype=np.float32)
    f, f1 = ti.field(ti.f32, (W, H)), ti.Vector.field(1, ti.f32, (W, H))
    f.from_numpy(x)
    f1.from_numpy(x[:, :, None])
    win.get_canvas().set_image(f)
    np.testing.assert_allclose(rgb(win), np.repeat(x[:, :, None], 3, 2), atol=1e-6)
    win.get_canvas().set_image(f1)
    np.testing.assert_allclose(rgb(win), np.stack([x, 0 * x, 0 * x], 2), atol=1e-6)
    with pytest.raises(ValueError):
        win.get_canvas().set_image(np.zeros((W, H, 5), np.float32))


def _grid_mesh(n=5, seed=4):
    """A wavy n x n grid of vertices seen at a slant, its index buffer (two triangles a
    cell, each vertex shared by up to six), per-vertex colours and normals."""
    rng = np.random.default_rng(seed)
    u, v = np.meshgrid(np.linspace(-1, 1, n), np.linspace(-1, 1, n), indexing="ij")
    pos = np.stack([u, v, 0.3 * np.sin(2 * u) * np.cos(3 * v)], -1).reshape(-1, 3)
    cells = [(i * n + j, (i + 1) * n + j, i * n + j + 1, i * n + j + 1, (i + 1) * n + j,
              (i + 1) * n + j + 1) for i in range(n - 1) for j in range(n - 1)]
    idx = np.array(cells, np.int32).reshape(-1)
    nrm = rng.normal(size=pos.shape) + [0, 0, 2]
    nrm /= np.linalg.norm(nrm, axis=1, keepdims=True)
    col = rng.uniform(0.2, 1, (len(pos), 3))
    return pos.astype(np.float32), idx, nrm.astype(np.float32), col.astype(np.float32)


@pytest.mark.parametrize("eye", [(0.4, -0.5, 3.0), (0.3, 0.6, -3.0)])   # front, and behind
def test_a_mesh_drawn_from_its_index_buffer_equals_its_triangles_written_out(eye):
    # Oracle: the same triangles with their corners copied out (no index buffer): every
    # pixel alike, colour and depth, for per-vertex colours and normals, two-sided, and
    # for instances and index/vertex ranges
    pos, idx, nrm, col = _grid_mesh()
    mats = np.tile(np.eye(4, dtype=np.float32), (2, 1, 1))
    mats[1, :3, :3] = [[0.8, -0.6, 0], [0.6, 0.8, 0], [0, 0, 1]]
    mats[1, :3, 3] = [0.5, 0.2, -0.4]

    def picture(indexed):
        win = window()
        scene = win.get_scene()
        cam = ti.ui.Camera()
        cam.position(*eye)
        cam.lookat(0, 0, 0)
        scene.set_camera(cam)
        scene.ambient_light((0.2, 0.2, 0.2))
        scene.point_light((1, 2, 3), (0.9, 0.9, 0.9))
        scene.point_light((-1, -2, -3), (0.5, 0.4, 0.3))
        if indexed:
            scene.mesh(pos, idx, nrm, per_vertex_color=col, two_sided=True)
            # the second half of the index buffer, on vertices given one place further on
            scene.mesh_instance(np.concatenate([pos[:1], pos]) * 0.5,
                                idx[len(idx) // 2:], np.concatenate([nrm[:1], nrm]),
                                per_vertex_color=np.concatenate([col[:1], col]),
                                transforms=mats, vertex_offset=1)
        else:
            scene.mesh(pos[idx], normals=nrm[idx], per_vertex_color=col[idx], two_sided=True)
            half = idx[len(idx) // 2:]
            scene.mesh_instance(pos[half] * 0.5, normals=nrm[half], per_vertex_color=col[half],
                                transforms=mats)
        win.get_canvas().scene(scene)
        return rgb(win), win.get_depth_buffer_as_numpy()

    a, da = picture(True)
    b, db = picture(False)
    assert (da < 1).sum() > 500                      # the mesh covers a good part of it
    # (an instance's vertices are moved by NumPy's matmul, whose rounding may differ by the
    # length of the array: an ulp)
    np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(da, db, atol=1e-6)
    np.testing.assert_array_equal(da < 1, db < 1)


def test_a_mesh_index_buffer_cut_by_the_near_plane_equals_its_triangles_written_out():
    # the camera inside the grid's span: triangles behind the eye are cut, the others keep
    # their shared vertices; the picture is that of the copied-out triangles
    pos, idx, nrm, col = _grid_mesh(7)

    def picture(indexed):
        win = window()
        scene = win.get_scene()
        cam = ti.ui.Camera()
        cam.position(0.1, -0.2, 0.6)
        cam.lookat(0.3, 0.1, 0.0)
        cam.up(0, 0, 1)
        scene.set_camera(cam)
        scene.ambient_light((1, 1, 1))
        if indexed:
            scene.mesh(pos * [3, 3, 1], idx, nrm, per_vertex_color=col, two_sided=True)
        else:
            scene.mesh((pos * [3, 3, 1])[idx], normals=nrm[idx], per_vertex_color=col[idx],
                       two_sided=True)
        win.get_canvas().scene(scene)
        return rgb(win), win.get_depth_buffer_as_numpy()

    a, da = picture(True)
    b, db = picture(False)
    assert (da < 1).sum() > 500
    np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_array_equal(da, db)


def _ortho_camera(eye_z):
    """An orthographic camera at (0, 0, eye_z) looking at the origin."""
    cam = ti.ui.Camera()
    cam.projection_mode(ti.ui.ProjectionMode.Orthogonal)
    cam.position(0, 0, eye_z)
    cam.lookat(0, 0, 0)
    return cam


def _lit_square(two_sided, light, eye_z):
    """A square in the plane z = 0 (normals +z), seen orthographically from (0, 0, eye_z),
    lit by one white light at `light` and no ambient light."""
    win = window((32, 32))
    scene = win.get_scene()
    cam = _ortho_camera(eye_z)
    scene.set_camera(cam)
    scene.ambient_light((0, 0, 0))
    scene.point_light(light, (1, 1, 1))
    v = np.array([[-0.8, -0.8, 0], [0.8, -0.8, 0], [0.8, 0.8, 0], [-0.8, 0.8, 0]], np.float32)
    scene.mesh(v, np.array([0, 1, 2, 0, 2, 3], np.int32), normals=np.tile([0, 0, 1], (4, 1)),
               color=(0.6, 0.5, 0.4), two_sided=two_sided)
    win.get_canvas().scene(scene)
    return rgb(win)


def test_a_two_sided_mesh_is_lit_from_either_side_as_taichis_shader():
    # Taichi's Mesh_vk.frag: the diffuse factor is |l . n| when two-sided, max(l . n, 0)
    # when not; here the light is behind the square as the camera sees it
    light = np.array([0.3, 0.2, -2.0])
    x, y = centres(32, 32)
    x, y = -1 + x * 2 / 32, -1 + y * 2 / 32       # the orthographic camera's [-1, 1]^2
    inside = (np.abs(x) < 0.75) & (np.abs(y) < 0.75)
    to_light = light - np.stack([x, y, np.zeros_like(x)], -1)
    factor = np.abs(to_light[..., 2]) / np.linalg.norm(to_light, axis=-1)
    expect = np.array([0.6, 0.5, 0.4]) * factor[..., None]
    img = _lit_square(True, tuple(light), 3.0)
    np.testing.assert_allclose(img[inside], expect[inside], atol=2e-5)
    assert (_lit_square(False, tuple(light), 3.0)[inside] == 0).all()   # one-sided: dark
    # the light in front and the camera behind (which sees x mirrored): still lit, by the
    # Lambert term alone (fluxion's highlight shows on the side the light is on)
    front = np.array([0.3, 0.2, 2.0])
    to_light = front - np.stack([-x, y, np.zeros_like(x)], -1)
    factor = np.abs(to_light[..., 2]) / np.linalg.norm(to_light, axis=-1)
    img = _lit_square(True, tuple(front), -3.0)
    np.testing.assert_allclose(img[inside], (np.array([0.6, 0.5, 0.4]) * factor[..., None])[inside],
                               atol=2e-5)


def test_the_api_takes_taichis_names_and_defaults():
    """Every public method of Taichi 1.7.4's ti.ui classes exists here with the same
    parameter names, order and defaults (read from Taichi's own package)."""
    import inspect
    import sys
    tu = pytest.importorskip("taichi.ui")
    scene_v2 = sys.modules["taichi.ui.scene"].SceneV2
    for theirs, ours in ((tu.Window, ti.ui.Window), (tu.Canvas, ti.ui.Canvas),
                         (scene_v2, ti.ui.Scene), (tu.Scene, ti.ui.Scene),
                         (tu.Camera, ti.ui.Camera), (tu.Gui, ti.ui.Gui)):
        for name, f in vars(theirs).items():
            if name.startswith("_") and name != "__init__" or isinstance(f, property):
                if isinstance(f, property):
                    assert hasattr(ours, name) or name == "event", (ours, name)
                continue
            if name == "__init__" and theirs is not tu.Window:
                continue        # (the original's wrap a C++ object; not built by users)
            params = [(p.name, p.default) for p in inspect.signature(f).parameters.values()]
            mine = [(p.name, p.default) for p in
                    inspect.signature(getattr(ours, name)).parameters.values()]
            assert mine == params, (ours.__name__, name)
    for name in dir(tu):
        if not name.startswith("_") and not inspect.ismodule(getattr(tu, name)):
            assert hasattr(ti.ui, name), name
    assert ti.ui.GUI is ti.GUI and ti.ui.rgb_to_hex((1, 0, 0)) == 0xFF0000


def test_triangles_sharing_an_edge_leave_no_hole_on_it():
    # a square cut along both diagonals, which run through pixel centres: every centre
    # inside the square is covered, on the shared edges too (2-D canvas and 3-D mesh)
    x, y = centres(32, 32)
    inside = (np.abs(x - 16) < 12.5) & (np.abs(y - 16) < 12.5)
    corners = np.array([[0.1, 0.1], [0.9, 0.1], [0.9, 0.9], [0.1, 0.9]], np.float32)
    centre = np.array([0.5, 0.5], np.float32)
    tris = np.concatenate([[corners[k], corners[(k + 1) % 4], centre] for k in range(4)])
    win = window((32, 32))
    win.get_canvas().triangles(tris, color=(1, 1, 1))
    assert (rgb(win)[inside] == 1).all()
    win = window((32, 32))
    scene = win.get_scene()
    cam = _ortho_camera(3)
    scene.set_camera(cam)
    scene.ambient_light((1, 1, 1))
    v3 = np.concatenate([tris * 2 - 1, np.zeros((len(tris), 1), np.float32)], axis=1)
    scene.mesh(v3, color=(1, 1, 1))
    win.get_canvas().scene(scene)
    assert (win.get_depth_buffer_as_numpy()[inside] > 0).all()


def test_show_wireframe_draws_the_edges_a_pixel_wide_and_no_faces():
    # Taichi draws such a mesh's triangles as lines (Vulkan's line polygon mode, 1 pixel)
    win = window((32, 32))
    scene = win.get_scene()
    cam = _ortho_camera(3)
    scene.set_camera(cam)
    v = np.array([[-0.6, -0.6, 0], [0.6, -0.6, 0], [0.6, 0.6, 0], [-0.6, 0.6, 0]], np.float32)

    def draw(ambient, light=None):
        scene.set_camera(cam)
        scene.ambient_light(ambient)
        if light is not None:
            scene.point_light(light, (1, 1, 1))
        scene.mesh(v, np.array([0, 1, 2, 0, 2, 3], np.int32), color=(0.2, 0.7, 0.4),
                   show_wireframe=True)
        win.get_canvas().scene(scene)
        img = rgb(win).copy()
        win.show()
        return img

    img = draw((1, 1, 1))
    # distance of each pixel centre to the five edges, in pixels (16 pixels a unit)
    x, y = centres(32, 32)
    px = (v[:, :2] + 1) * 16
    dist = np.full(x.shape, np.inf)
    for a, b in ((0, 1), (1, 2), (2, 3), (3, 0), (0, 2)):
        d = px[b] - px[a]
        t = np.clip(((x - px[a][0]) * d[0] + (y - px[a][1]) * d[1]) / d.dot(d), 0, 1)
        dist = np.minimum(dist, np.hypot(x - px[a][0] - t * d[0], y - px[a][1] - t * d[1]))
    on, off = dist < 0.5 - EPS, dist > 0.5 + EPS
    assert on.sum() > 80
    np.testing.assert_allclose(img[on], np.tile([0.2, 0.7, 0.4], (on.sum(), 1)), atol=1e-6)
    assert (img[off] == 0).all()
    # lit as Taichi's mesh shader lights it: the computed normal +z, the light straight
    # above the middle, the same Lambert factor at every corner
    lit = draw((0, 0, 0), (0, 0, 2))
    factor = 2 / math.sqrt(0.72 + 4)
    np.testing.assert_allclose(lit[on], np.tile(np.array([0.2, 0.7, 0.4]) * factor,
                                                 (on.sum(), 1)), atol=1e-5)


@ti.kernel
def _paint_texture(t: ti.types.rw_texture(num_dimensions=2, fmt=ti.Format.rgba8, lod=0)):
    for i, j in ti.ndrange(W, H):
        t.store(ti.Vector([i, j]), ti.Vector([3 * i, 5 * j, 7, 255]) / 255.0)


def test_set_image_of_a_texture_and_of_ndarrays():
    # Taichi's canvas.set_image takes a ti.Texture (copied texel by texel, as fetched) and
    # ndarrays as it takes numpy arrays
    win = window()
    tex = ti.Texture(ti.Format.rgba8, (W, H))
    _paint_texture(tex)
    win.get_canvas().set_image(tex)
    i, j = np.meshgrid(np.arange(W), np.arange(H), indexing="ij")
    want = np.stack([3 * i, 5 * j, np.full_like(i, 7)], -1) / 255.0
    np.testing.assert_allclose(rgb(win), want, atol=1e-6)
    rng = np.random.default_rng(11)
    x = rng.random((W, H, 3), dtype=np.float32)
    nd = ti.Vector.ndarray(3, ti.f32, (W, H))
    nd.from_numpy(x)
    win.get_canvas().set_image(nd)
    np.testing.assert_allclose(rgb(win), x, atol=1e-6)
    g = ti.ndarray(ti.f32, (W, H))
    g.from_numpy(x[:, :, 0])
    win.get_canvas().set_image(g)
    np.testing.assert_allclose(rgb(win), np.repeat(x[:, :, :1], 3, 2), atol=1e-6)


def test_scene_lines_trims_a_vertex_count_past_the_end_as_taichi():
    # Taichi's SceneV2.lines cuts vertex_count to the vertices there are (and to an even
    # number), with a warning, where other ranges are errors
    ends = np.array([[-0.5, -0.5, 0], [0.5, 0.5, 0], [-0.5, 0.5, 0], [0.5, -0.5, 0],
                     [0, 0.6, 0]], np.float32)
    pictures = []
    for count, warns in ((4, False), (5, False), (9, True)):
        win = window()
        scene = win.get_scene()
        cam = ti.ui.Camera()
        cam.position(0, 0, 3)
        cam.lookat(0, 0, 0)
        scene.set_camera(cam)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            scene.lines(ends, width=2, color=(1, 1, 1), vertex_count=count)
        assert bool(w) == warns
        win.get_canvas().scene(scene)
        pictures.append(rgb(win))
    assert pictures[0].sum() > 20
    np.testing.assert_array_equal(pictures[0], pictures[1])
    np.testing.assert_array_equal(pictures[0], pictures[2])


def test_fps_limit_paces_the_frames_a_window_shows(monkeypatch):
    from fluxion.ui import window as window_module
    waits, presented = [], []

    class Screen:
        def present(self, image):
            presented.append(image.size)

        def pump(self):
            pass

    now = [100.0]

    class Clock:                           # (window.py's clock only)
        sleep = waits.append

        @staticmethod
        def perf_counter():
            return now[0]

    monkeypatch.setattr(window_module, "time", Clock)
    win = ti.ui.Window("paced", (16, 8), fps_limit=20, show_window=False)
    win.show()
    assert waits == []                     # headless: never held back
    win._window = Screen()                 # as if shown on a display
    win.show()                             # at once: held back 1 / 20 s
    now[0] += 0.02
    win.show()                             # 20 ms later: the 30 ms left
    now[0] += 0.2
    win.show()                             # late: not held back
    assert presented == [(16, 8)] * 3
    assert waits == [pytest.approx(0.05), pytest.approx(0.03)]
    win._window = None
