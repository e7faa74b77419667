"""`ti.tools.PLYWriter`: point clouds and meshes as PLY files, one per frame.

Channels are added one array per property (`add_vertex_pos(x, y, z)`, colors, normals, any
named channel of a PLY type); a 2-D channel becomes columns `key_1`, `key_2`, ... Faces are
triangles or quads given as vertex indices. `export` writes binary PLY in the machine's byte
order, `export_ascii` text, and `export_frame(n, "name.ply")` writes `name_00000n.ply`. The
files are the original system's, byte for byte: the same header lines and property names, so
tools that read its output read fluxion's. The records are written with one numpy structured
array per element instead of value by value (a million vertices take milliseconds).
"""
from __future__ import annotations

import sys

import numpy as np

# PLY's scalar types and the numpy types that store them
PLY_TYPES = {"char": np.int8, "uchar": np.uint8, "short": np.int16, "ushort": np.uint16,
             "int": np.int32, "uint": np.uint32, "float": np.float32, "double": np.float64}

_VERTS_PER_FACE = {"tri": 3, "quad": 4}


class PLYWriter:
    """Collects per-vertex and per-face channels of `num_vertices` vertices and `num_faces`
    faces (`face_type` "tri" or "quad"), then writes them as PLY."""

    def __init__(self, num_vertices: int, num_faces: int = 0, face_type: str = "tri",
                 comment: str = "created by PLYWriter"):
        if num_vertices <= 0:
            raise ValueError("PLYWriter: num_vertices should be greater than 0")
        if num_faces < 0:
            raise ValueError("PLYWriter: num_faces shouldn't be less than 0")
        if face_type not in _VERTS_PER_FACE:
            raise ValueError("PLYWriter: only 'tri' and 'quad' faces are supported")
        self.num_vertices, self.num_faces = int(num_vertices), int(num_faces)
        self.face_type, self.comment = face_type, comment
        self.vertex_channels = []       # (name, ply type, data)
        self.face_channels = []
        self.face_indices = -np.ones((self.num_faces, _VERTS_PER_FACE[face_type]), np.int32)

    # -- channels -------------------------------------------------------------------------
    def _add(self, channels, count, what, key, data_type, data):
        if data_type not in PLY_TYPES:
            # the original skips the channel with a message, and so does fluxion
            print(f"Unknown type {data_type} detected, skipping this channel")
            return
        data = np.asarray(data)
        if data.ndim <= 1:
            if data.size != count:
                raise ValueError(f"PLYWriter: the {what} channel '{key}' has {data.size} values,"
                                 f" not {count}")
            columns = [(key, data.reshape(-1))]
        else:
            if data.ndim != 2 or data.size % count:
                raise ValueError(f"PLYWriter: the {what} channel '{key}' has shape {data.shape},"
                                 f" which is not ({count}, k)")
            data = data.reshape(count, data.size // count)
            columns = [(f"{key}_{c + 1}", data[:, c]) for c in range(data.shape[1])]
        names = {n for n, _, _ in channels}
        for name, col in columns:
            if name in names:
                print(f"WARNING: duplicate key {name} detected")
            channels.append((name, data_type, col.astype(PLY_TYPES[data_type])))

    def add_vertex_channel(self, key: str, data_type: str, data):
        self._add(self.vertex_channels, self.num_vertices, "vertex", key, data_type, data)

    def add_face_channel(self, key: str, data_type: str, data):
        self._add(self.face_channels, self.num_faces, "face", key, data_type, data)

    def _add_floats(self, names, arrays):
        for n, a in zip(names, arrays):
            self.add_vertex_channel(n, "float", a)

    def add_vertex_pos(self, x, y, z):
        self._add_floats(("x", "y", "z"), (x, y, z))

    def add_vertex_normal(self, nx, ny, nz):
        self._add_floats(("nx", "ny", "nz"), (nx, ny, nz))

    def add_vertex_vel(self, vx, vy, vz):
        self._add_floats(("vx", "vy", "vz"), (vx, vy, vz))

    def add_vertex_color(self, r, g, b):
        self._add_floats(("red", "green", "blue"), (r, g, b))

    def add_vertex_alpha(self, alpha):
        self._add_floats(("Alpha",), (alpha,))

    def add_vertex_rgba(self, r, g, b, a):
        self._add_floats(("red", "green", "blue", "Alpha"), (r, g, b, a))

    def add_vertex_id(self):
        self.add_vertex_channel("id", "int", np.arange(self.num_vertices))

    def add_vertex_piece(self, piece):
        self.add_vertex_channel("piece", "int", piece)

    def add_faces(self, indices):
        k = _VERTS_PER_FACE[self.face_type]
        indices = np.asarray(indices)
        if indices.size != k * self.num_faces:
            raise ValueError(f"PLYWriter: {self.num_faces} {self.face_type} faces need "
                             f"{k * self.num_faces} vertex indices, got {indices.size}")
        self.face_indices = indices.reshape(self.num_faces, k).astype(np.int32)

    def add_face_id(self):
        self.add_face_channel("id", "int", np.arange(self.num_faces))

    def add_face_piece(self, piece):
        self.add_face_channel("piece", "int", piece)

    # -- writing --------------------------------------------------------------------------
    def sanity_check(self):
        names = {n for n, _, _ in self.vertex_channels}
        if not {"x", "y", "z"} <= names:
            raise ValueError("PLYWriter: the vertex positions are missing (add_vertex_pos)")
        if self.num_faces and ((self.face_indices < 0).any()
                               or (self.face_indices >= self.num_vertices).any()):
            raise ValueError("PLYWriter: the face indices are invalid (each must name a vertex)")

    def _header(self, fmt):
        lines = ["ply", f"format {fmt} 1.0", f"comment {self.comment}",
                 f"element vertex {self.num_vertices}"]
        lines += [f"property {t} {n}" for n, t, _ in self.vertex_channels]
        if self.num_faces:
            lines += [f"element face {self.num_faces}", "property list uchar int vertex_indices"]
            lines += [f"property {t} {n}" for n, t, _ in self.face_channels]
        lines.append("end_header")
        return "".join(line + "\n" for line in lines)

    @staticmethod
    def _records(count, columns):
        rec = np.empty(count, dtype=[(f"f{i}", c.dtype) for i, (_, c) in enumerate(columns)])
        for i, (_, c) in enumerate(columns):
            rec[f"f{i}"] = c
        return rec

    def export(self, path):
        """Binary PLY in this machine's byte order."""
        self.sanity_check()
        verts = self._records(self.num_vertices, [(n, c) for n, _, c in self.vertex_channels])
        k = self.face_indices.shape[1]
        faces = self._records(self.num_faces, [("n", np.full(self.num_faces, k, np.uint8))]
                              + [(f"v{j}", self.face_indices[:, j]) for j in range(k)]
                              + [(n, c) for n, _, c in self.face_channels])
        with open(path, "wb") as f:
            f.write(self._header(f"binary_{sys.byteorder}_endian").encode())
            f.write(verts.tobytes())
            if self.num_faces:
                f.write(faces.tobytes())

    def export_ascii(self, path):
        """Text PLY (each value as str() prints its numpy scalar: float32 in its shortest form)."""
        self.sanity_check()
        out = [self._header("ascii")]
        cols = [c for _, _, c in self.vertex_channels]
        for i in range(self.num_vertices):
            out.append("".join(str(c[i]) + " " for c in cols) + "\n")
        k = self.face_indices.shape[1]
        fcols = [c for _, _, c in self.face_channels]
        for i in range(self.num_faces):
            out.append(f"{k} " + " ".join(map(str, self.face_indices[i])) + " "
                       + "".join(str(c[i]) + " " for c in fcols) + "\n")
        with open(path, "w") as f:
            f.write("".join(out))

    @staticmethod
    def _frame_path(series_num, path):
        if path.endswith(".ply"):
            path = path[:-4]
        return f"{path}_{series_num:06d}.ply"

    def export_frame(self, series_num: int, path: str):
        self.export(self._frame_path(series_num, path))

    def export_frame_ascii(self, series_num: int, path: str):
        self.export_ascii(self._frame_path(series_num, path))


__all__ = ["PLYWriter"]
