"""fluxion.distributed: the block geometry, the halo exchange and its transpose, on one
process (a group of one rank, in this process) and on two (two_ranks.py, in processes of
its own). Expected halos come from numpy's np.pad of the global array."""
import os
import subprocess
import sys

import numpy as np
import pytest

import fluxion as ti
import fluxion.distributed as fd
from fluxion.distributed.memory import tensors_of

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


# -- geometry (no torch) ------------------------------------------------------------------
@pytest.mark.cpu_only
@pytest.mark.parametrize("world,ndim,want", [(1, 2, (1, 1)), (4, 2, (2, 2)), (6, 2, (3, 2)),
                                             (7, 2, (7, 1)), (8, 3, (2, 2, 2)),
                                             (12, 2, (4, 3))])
def test_dims_create_balances_the_parts(world, ndim, want):
    assert fd.dims_create(world, ndim) == want


@pytest.mark.cpu_only
@pytest.mark.parametrize("shape,world,parts", [((10, 7), 4, None), ((9,), 4, (4,)),
                                               ((5, 6, 7), 6, (1, 2, 3))])
def test_blocks_cover_the_domain_once(shape, world, parts):
    g = fd.Grid(shape, world, parts=parts, halo=1)
    owner = np.full(shape, -1)
    for r in range(world):
        assert g.rank_of(g.coords(r)) == r
        start, size = g.block(r)
        cut = tuple(slice(s, s + n) for s, n in zip(start, size))
        assert (owner[cut] == -1).all()
        owner[cut] = r
        assert g.padded_shape(r) == tuple(n + 2 for n in size)
    assert (owner >= 0).all()
    # blocks along an axis differ by one cell at most
    for d in range(len(shape)):
        sizes = {g.block(r)[1][d] for r in range(world)}
        assert max(sizes) - min(sizes) <= 1


@pytest.mark.cpu_only
def test_neighbours_wrap_only_on_periodic_axes():
    g = fd.Grid((8, 8), 4, parts=(2, 2), periodic=(True, False))
    # rank 0 is at (0, 0): along axis 0 both neighbours are rank 2 (wrapping); along axis 1
    # there is no lower one
    assert g.neighbors(0, 0) == (2, 2)
    assert g.neighbors(0, 1) == (None, 1)
    assert g.neighbors(3, 1) == (2, None)


@pytest.mark.cpu_only
@pytest.mark.parametrize("kw,err", [
    (dict(global_shape=(8, 8), world_size=4, parts=(3, 1)), "4 ranks"),
    (dict(global_shape=(3, 8), world_size=4, parts=(4, 1)), "cannot be split"),
    (dict(global_shape=(8, 8), world_size=4, parts=(4, 1), halo=3), "narrower than the halo"),
    (dict(global_shape=(8, 8), world_size=1, halo=-1), ">= 0"),
    (dict(global_shape=(8, 8), world_size=1, halo=(1, 1, 1)), "3 entries for 2 axes"),
    (dict(global_shape=(), world_size=1), "non-empty"),
])
def test_bad_geometry_is_refused(kw, err):
    with pytest.raises(ValueError, match=err):
        fd.Grid(**kw)


# -- one rank, in this process ------------------------------------------------------------
@pytest.fixture
def group_of_one(tmp_path):
    torch = pytest.importorskip("torch")
    dist = torch.distributed
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rdv'}", rank=0,
                            world_size=1)
    yield torch
    dist.destroy_process_group()


def _pad(a, halo, periodic):
    for d, (h, p) in enumerate(zip(halo, periodic)):
        pad = [(0, 0)] * a.ndim
        pad[d] = (h, h)
        a = np.pad(a, pad, mode="wrap") if p else np.pad(a, pad)
    return a


@pytest.mark.cpu_only
@pytest.mark.parametrize("halo,periodic", [(1, (True, True)), (2, (True, False)),
                                           ((0, 3), (False, True))])
def test_one_rank_wraps_its_own_block(group_of_one, halo, periodic):
    torch = group_of_one
    g = np.random.default_rng(1).standard_normal((5, 6))
    dec = fd.Decomposition(g.shape, halo=halo, periodic=periodic)
    want = _pad(g, dec.halo, periodic)
    x = np.zeros(dec.padded_shape)
    x[dec.interior] = g
    assert dec.exchange(x) is x
    np.testing.assert_array_equal(x, want)
    np.testing.assert_array_equal(dec.scatter(g), want)
    np.testing.assert_array_equal(dec.gather(x), g)
    # the transpose: <E a, b> == <a, E^T b>
    a, b = torch.randn(dec.padded_shape, dtype=torch.float64), torch.randn(dec.padded_shape,
                                                                           dtype=torch.float64)
    lhs = float((dec.exchange(a.clone()) * b).sum())
    rhs = float((a * dec.exchange_adjoint(b.clone())).sum())
    assert abs(lhs - rhs) <= 1e-12 * abs(lhs)


def test_a_field_exchanges_on_every_backend(group_of_one, fluxion_arch):
    """On the CPU the exchange works in the field's memory; on CUDA (or its emulator) it goes
    through a host copy that is written back: either way a kernel reads the new halo."""
    g = np.arange(20, dtype=np.float32).reshape(4, 5)
    dec = fd.Decomposition(g.shape, halo=1)
    u = dec.field(ti.f32)
    u.from_numpy(np.pad(g, 1))
    # the CPU's kernels read the host memory, which the exchange then works in
    assert tensors_of(u, dec.padded_shape).zero_copy == (fluxion_arch == "cpu")
    dec.exchange(u)

    @ti.kernel
    def corner_sum(u: ti.template()) -> ti.f32:
        return u[0, 0] + u[5, 6] + u[0, 6] + u[5, 0]

    # each corner of the padded block holds the opposite corner of the domain
    assert corner_sum(u) == g[3, 4] + g[0, 0] + g[3, 0] + g[0, 4]
    np.testing.assert_array_equal(u.to_numpy(), _pad(g, (1, 1), (True, True)))


@pytest.mark.cpu_only
def test_all_reduce_of_one_rank_and_bad_input(group_of_one):
    assert fd.all_reduce(3, "sum") == 3 and fd.all_reduce(2.5, "max") == 2.5
    with pytest.raises(ValueError, match="'sum' or 'max'"):
        fd.all_reduce(1.0, "min")
    with pytest.raises(TypeError, match="a number or a tensor"):
        fd.all_reduce("1.0")
    dec = fd.Decomposition((4, 4))
    with pytest.raises(ValueError, match="padded block"):
        dec.exchange(np.zeros((4, 4)))
    with pytest.raises(TypeError, match="expected a fluxion field"):
        dec.exchange([[0.0] * 6] * 6)
    ro = np.zeros(dec.padded_shape)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        dec.exchange(ro)


@pytest.mark.cpu_only
def test_without_a_process_group_the_error_says_what_to_do():
    pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="init_process_group"):
        fd.Decomposition((4, 4))


# -- two ranks, in processes of their own ----------------------------------------------
@pytest.mark.cpu_only
def test_two_ranks_exchange_reduce_and_gather(tmp_path):
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src") + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, os.path.join(HERE, "two_ranks.py"), "2",
                        str(tmp_path / "rdv")], capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "all checks passed" in r.stdout
