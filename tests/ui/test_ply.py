"""ti.tools.PLYWriter: the files it writes, byte for byte those of the original system (where
taichi is installed), and read back by an independent parser of the format."""
import numpy as np
import pytest

import fluxion as ti

pytestmark = pytest.mark.cpu_only


def _fill(w, rng, n, nf, quad):
    w.add_vertex_pos(rng.random(n), rng.random(n), rng.random(n))
    w.add_vertex_rgba(rng.random(n), rng.random(n), rng.random(n), rng.random(n))
    w.add_vertex_normal(rng.random(n), rng.random(n), rng.random(n))
    w.add_vertex_id()
    w.add_vertex_channel("tex", "double", rng.random((n, 2)))
    w.add_vertex_channel("flag", "uchar", rng.integers(0, 255, n))
    if nf:
        w.add_faces(rng.integers(0, n, nf * (4 if quad else 3)))
        w.add_face_id()
        w.add_face_channel("area", "float", rng.random(nf))


def _write(mod, tmp_path, tag, quad, ascii_):
    rng = np.random.default_rng(7)
    n, nf = 50, 20
    w = mod.tools.PLYWriter(num_vertices=n, num_faces=nf, face_type="quad" if quad else "tri")
    _fill(w, rng, n, nf, quad)
    path = str(tmp_path / f"{tag}.ply")
    (w.export_frame_ascii if ascii_ else w.export_frame)(3, path)
    return open(str(tmp_path / f"{tag}_000003.ply"), "rb").read()


@pytest.mark.parametrize("quad", [False, True])
@pytest.mark.parametrize("ascii_", [False, True])
def test_files_are_those_of_the_original(tmp_path, quad, ascii_):
    taichi = pytest.importorskip("taichi")
    assert _write(ti, tmp_path, "f", quad, ascii_) == _write(taichi, tmp_path, "t", quad, ascii_)


def test_binary_file_reads_back(tmp_path):
    rng = np.random.default_rng(3)
    n, nf = 7, 4
    x, y, z = rng.random(n), rng.random(n), rng.random(n)
    faces = rng.integers(0, n, (nf, 3))
    w = ti.tools.PLYWriter(n, nf)
    w.add_vertex_pos(x, y, z)
    w.add_faces(faces)
    w.add_face_channel("k", "short", np.arange(nf) - 2)
    w.export(str(tmp_path / "a.ply"))
    data = open(tmp_path / "a.ply", "rb").read()
    head, body = data.split(b"end_header\n")
    lines = head.decode().splitlines()
    assert lines[:4] == ["ply", f"format binary_{__import__('sys').byteorder}_endian 1.0",
                         "comment created by PLYWriter", f"element vertex {n}"]
    assert "property list uchar int vertex_indices" in lines
    v = np.frombuffer(body[:12 * n], np.float32).reshape(n, 3)
    np.testing.assert_array_equal(v, np.stack([x, y, z], 1).astype(np.float32))
    rec = np.frombuffer(body[12 * n:], dtype=[("c", "u1"), ("i", "<i4", 3), ("k", "<i2")])
    assert (rec["c"] == 3).all()
    np.testing.assert_array_equal(rec["i"], faces)
    np.testing.assert_array_equal(rec["k"], np.arange(nf) - 2)


def test_bad_input_is_refused_clearly(tmp_path):
    w = ti.tools.PLYWriter(4, 1)
    with pytest.raises(ValueError, match="positions are missing"):
        w.export(str(tmp_path / "a.ply"))
    with pytest.raises(ValueError, match="has 3 values, not 4"):
        w.add_vertex_channel("a", "float", np.zeros(3))
    w.add_vertex_pos(np.zeros(4), np.zeros(4), np.zeros(4))
    w.add_faces(np.array([0, 1, 9]))
    with pytest.raises(ValueError, match="face indices are invalid"):
        w.export(str(tmp_path / "a.ply"))
