"""`ti.ui.Scene`: what a frame's 3-D view holds (meshes, particles, lines, lights, the camera),
gathered as numpy arrays until `canvas.scene(scene)` draws it (fluxion/ui/raster3d.py).

As in the original, a scene holds one frame: `canvas.scene` takes its contents and empties
it (the camera stays), so a program declares its geometry and lights again every frame.
"""
from __future__ import annotations

import warnings

import numpy as np

from fluxion.ui import raster3d, staging
from fluxion.ui.camera import Camera

_F32 = np.float32


def _range(n, offset, count, what):
    offset = int(offset)
    count = n - offset if count is None else int(count)
    if offset < 0 or count < 0 or offset + count > n:
        raise IndexError(f"ti.ui: {what} [{offset}, {offset + count}) is outside its {n}")
    return slice(offset, offset + count)


class Scene:
    """See the module docstring; `window.get_scene()` gives one (so does `ti.ui.Scene()`)."""

    def __init__(self):
        self.camera = Camera()
        self._clear()

    def _clear(self):
        # meshes: (positions (V, 3), normals (V, 3), colors (V, 3), indices (3T,), sided),
        # drawn from their index buffers (a vertex is projected once, however many
        # triangles share it)
        self._tris = []
        self._wires = []         # meshes of show_wireframe=True, as _tris
        self._parts = []         # (centers (P, 3), radii (P,), colors (P, 3))
        self._lines = []         # (ends (2L, 3), colors (2L, 3), width in pixels)
        self._lights = []        # (x, y, z, r, g, b)
        self._ambient = np.array([0.1, 0.1, 0.1], _F32)

    def set_camera(self, camera):
        if not isinstance(camera, Camera):
            raise TypeError(f"Scene.set_camera takes a ti.ui.Camera, got {type(camera).__name__}")
        self.camera = camera

    def ambient_light(self, color):
        self._ambient = staging.color(color, "ambient_light's color")

    def point_light(self, pos, color):
        self._lights.append(np.concatenate([staging.color(pos, "point_light's pos"),
                                            staging.color(color, "point_light's color")]))

    def particles(self, centers, radius, color=(0.5, 0.5, 0.5), per_vertex_color=None,
                  per_vertex_radius=None, index_offset=0, index_count=None):
        """Spheres of `radius` (world units) around `centers`."""
        c = staging.vectors(centers, 3, "particles' centers")
        sel = _range(len(c), index_offset, index_count, "particles' index range")
        n = len(c)
        r = (np.full(n, radius, _F32) if per_vertex_radius is None else
             np.ascontiguousarray(staging.as_array(per_vertex_radius, "per_vertex_radius")
                                  .reshape(-1)[:n], _F32))
        col = (np.broadcast_to(staging.color(color), (n, 3)) if per_vertex_color is None else
               staging.colors(per_vertex_color, n, "per_vertex_color"))
        self._parts.append((c[sel], r[sel], col[sel]))

    def lines(self, vertices, width, indices=None, color=(0.5, 0.5, 0.5),
              per_vertex_color=None, vertex_offset=0, vertex_count=None, index_offset=0,
              index_count=None):
        """Segments between vertices 2k and 2k+1 (or of `indices`), `width` pixels wide,
        unlit."""
        v = staging.vectors(vertices, 3, "lines' vertices")
        col = (np.broadcast_to(staging.color(color), (len(v), 3)) if per_vertex_color is None
               else staging.colors(per_vertex_color, len(v), "per_vertex_color"))
        if indices is None:
            if vertex_count is not None and int(vertex_offset) + int(vertex_count) > len(v):
                # (the original trims it too, with a warning)
                warnings.warn(f"ti.ui: Scene.lines' vertex_count {vertex_count} from "
                              f"{vertex_offset} passes its {len(v)} vertices: trimmed",
                              stacklevel=2)
                vertex_count = max(len(v) - int(vertex_offset), 0)
            sel = _range(len(v), vertex_offset, vertex_count, "lines' vertex range")
            idx = np.arange(len(v), dtype=np.int64)[sel]
            idx = idx[:len(idx) // 2 * 2]
        else:
            idx = staging.indices(indices, 2, 1 << 62, "lines' indices").astype(np.int64)
            idx = idx[_range(len(idx), index_offset, index_count, "lines' index range")]
            idx = idx[:len(idx) // 2 * 2] + int(vertex_offset)
            if idx.size and idx.max() >= len(v):
                raise IndexError(f"ti.ui: lines' indices refer to vertex {int(idx.max())} of "
                                 f"{len(v)}")
        self._lines.append((v[idx], np.ascontiguousarray(col[idx]), float(width)))

    def mesh(self, vertices, indices=None, normals=None, color=(0.5, 0.5, 0.5),
             per_vertex_color=None, two_sided=False, vertex_offset=0, vertex_count=None,
             index_offset=0, index_count=None, show_wireframe=False):
        """Triangles of `vertices` (3k, 3k+1, 3k+2, or of `indices`), lit; normals are
        computed (averaged around each vertex) when not given."""
        self.mesh_instance(vertices, indices, normals, color, per_vertex_color, two_sided,
                           None, 0, None, vertex_offset, vertex_count, index_offset,
                           index_count, show_wireframe)

    def mesh_instance(self, vertices, indices=None, normals=None, color=(0.5, 0.5, 0.5),
                      per_vertex_color=None, two_sided=False, transforms=None,
                      instance_offset=0, instance_count=None, vertex_offset=0,
                      vertex_count=None, index_offset=0, index_count=None,
                      show_wireframe=False):
        """The mesh drawn once per 4x4 matrix of `transforms` (world = M @ (x, y, z, 1))."""
        v = staging.vectors(vertices, 3, "mesh vertices")
        if indices is None:
            sel = _range(len(v), vertex_offset, vertex_count, "mesh vertex range")
            idx = np.arange(len(v), dtype=np.int32)[sel]
            idx = idx[:len(idx) // 3 * 3]
        else:
            idx = staging.indices(indices, 3, len(v), "mesh indices")
            idx = idx[_range(len(idx), index_offset, index_count, "mesh index range")]
            idx = idx[:len(idx) // 3 * 3] + np.int32(vertex_offset)
            if idx.size and idx.max() >= len(v):
                raise IndexError(f"ti.ui: mesh indices refer to vertex {int(idx.max())} of "
                                 f"{len(v)}")
        if normals is None:
            nrm = np.zeros_like(v)
            if len(idx):
                raster3d.normals(v, np.ascontiguousarray(idx), nrm)
        else:
            nrm = staging.vectors(normals, 3, "mesh normals")
        col = (np.broadcast_to(staging.color(color), (len(v), 3)) if per_vertex_color is None
               else staging.colors(per_vertex_color, len(v), "per_vertex_color"))
        # (the scene keeps what the call was given: a numpy array may change after it)
        v, nrm, col = (np.array(a, _F32) for a in (v, nrm, col))
        if len(nrm) < len(v):
            raise ValueError(f"ti.ui: mesh normals has {len(nrm)} normals for {len(v)} "
                             f"vertices")
        idx = np.ascontiguousarray(idx, np.int32)
        if transforms is None:
            mats = [None]
        else:
            m = staging.as_array(transforms, "transforms")
            if m.ndim != 3 or m.shape[1:] != (4, 4):
                raise ValueError(f"ti.ui: transforms must be 4x4 matrices, got shape {m.shape}")
            mats = m[_range(len(m), instance_offset, instance_count, "instance range")]
        into = self._wires if show_wireframe else self._tris
        for m in mats:
            if m is None:
                into.append((v, nrm, col, idx, bool(two_sided)))
                continue
            m = np.asarray(m, np.float64)
            normal_m = np.linalg.inv(m[:3, :3]).T if abs(np.linalg.det(m[:3, :3])) > 0 \
                else m[:3, :3]
            into.append(((v @ m[:3, :3].T + m[:3, 3]).astype(_F32),
                         (nrm @ normal_m.T).astype(_F32), col, idx, bool(two_sided)))

    def _take(self):
        """This frame's contents (see the module docstring), emptying the scene."""
        lines = self._lines + [self._wireframe(*w) for w in self._wires]
        taken = (self._tris, self._parts, lines, list(self._lights), self._ambient,
                 self.camera)
        self._clear()
        return taken

    def _wireframe(self, v, nrm, col, idx, two_sided):
        """A mesh of show_wireframe=True as the lines of its triangles' edges (each once),
        a pixel wide (the original draws its triangles as lines, of Vulkan's default width),
        lit at their ends by the scene's lights as the original's mesh shader lights a
        fragment (ambient, and a Lambert term per light: |n . l| when two-sided) and
        interpolated between them."""
        tri = idx.reshape(-1, 3).astype(np.int64)
        edges = np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]]), axis=1)
        edges = np.unique(edges, axis=0).reshape(-1)
        p, n, c = (a[edges].astype(np.float64) for a in (v, nrm, col))
        n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-20)
        lit = c * self._ambient
        for light in self._lights:
            to = light[:3] - p
            to /= np.maximum(np.linalg.norm(to, axis=1, keepdims=True), 1e-20)
            f = (n * to).sum(1)
            f = np.abs(f) if two_sided else np.maximum(f, 0.0)
            lit += c * light[3:] * f[:, None]
        return p.astype(_F32), lit.astype(_F32), 1.0
