"""Checks of fluxion.distributed on several processes, run by test_decomposition.py as
`python two_ranks.py NPROCS RENDEZVOUS_FILE`: the processes (gloo over loopback, started
with torch.multiprocessing.spawn) compare every exchange with the global array padded by
numpy (np.pad: 'wrap' on a periodic axis), so no result of fluxion.distributed is its own
oracle. A failed check raises in its process, and spawn makes this script exit non-zero."""
import sys

import numpy as np


def padded_oracle(global_array, halo, periodic, fill=0.0):
    """The global array with `halo` layers around every axis, as the halo exchange fills
    them: wrapped around on a periodic axis, `fill` past a non-periodic edge."""
    a = global_array
    for d, (h, p) in enumerate(zip(halo, periodic)):
        pad = [(0, 0)] * a.ndim
        pad[d] = (h, h)
        a = np.pad(a, pad, mode="wrap") if p else np.pad(a, pad, constant_values=fill)
    return a


def block_of(oracle, dec):
    """This rank's padded block cut from the padded global array."""
    return oracle[tuple(slice(s, s + n + 2 * h)
                        for s, n, h in zip(dec.start, dec.local_shape, dec.halo))]


def check_exchange(fd, torch, rank):
    rng = np.random.default_rng(7)
    for shape, halo, periodic, parts, elem in [
            ((7, 5), 1, (True, True), (2, 1), ()),
            ((7, 5), 1, (True, True), (1, 2), ()),
            ((6, 9), 2, (False, True), (1, 2), ()),
            ((9, 6), (2, 1), (True, False), (2, 1), (3,)),
            ((5, 4, 6), 1, (True, False, True), (1, 1, 2), ())]:
        g = rng.standard_normal(shape + elem)
        dec = fd.Decomposition(shape, halo=halo, parts=parts, periodic=periodic)
        want = block_of(padded_oracle(g, dec.halo + (0,) * len(elem),
                                      periodic + (False,) * len(elem)), dec)
        # the halo past a non-periodic edge is the caller's: 0 here, as in the oracle
        mine = np.zeros(dec.padded_shape + elem)
        mine[dec.interior] = g[tuple(slice(s, s + n)
                                     for s, n in zip(dec.start, dec.local_shape))]
        np.testing.assert_array_equal(dec.scatter(g), want)
        for kind in ("numpy", "torch"):
            x = mine.copy() if kind == "numpy" else torch.from_numpy(mine.copy())
            dec.exchange(x)
            np.testing.assert_array_equal(np.asarray(x), want, err_msg=f"{shape} {parts} {kind}")
        np.testing.assert_array_equal(dec.gather(torch.from_numpy(want)), g)


def check_adjoint(fd, torch, rank):
    """<E x, y> == <x, E^T y> summed over the ranks, for random x, y: exchange_adjoint is
    the transpose of exchange; and halo_exchange's backward is exchange_adjoint."""
    for shape, halo, periodic, parts in [((8, 6), 1, (True, True), (2, 1)),
                                         ((8, 6), 2, (True, False), (1, 2)),
                                         ((6, 7), 1, (False, True), (2, 1))]:
        dec = fd.Decomposition(shape, halo=halo, parts=parts, periodic=periodic)
        gen = torch.Generator().manual_seed(100 + rank)
        x = torch.randn(dec.padded_shape, generator=gen, dtype=torch.float64)
        y = torch.randn(dec.padded_shape, generator=gen, dtype=torch.float64)
        ex = dec.exchange(x.clone())
        ety = dec.exchange_adjoint(y.clone())
        lhs = fd.all_reduce(float((ex * y).sum()), "sum")
        rhs = fd.all_reduce(float((x * ety).sum()), "sum")
        assert abs(lhs - rhs) <= 1e-12 * abs(lhs), (shape, parts, lhs, rhs)
        xr = x.clone().requires_grad_()
        (dec.halo_exchange(xr) * y).sum().backward()
        assert torch.equal(xr.grad, ety)


def check_fields(fd, torch, rank, ti):
    """A field's halo is exchanged in its own memory (zero copy on the CPU), and a kernel
    launched afterwards reads it; a vector field's components travel together."""
    shape = (6, 4)
    g = np.arange(24, dtype=np.float64).reshape(shape) * 0.5
    dec = fd.Decomposition(shape, halo=1, parts=(2, 1), periodic=(True, False))
    u = dec.field(ti.f64)
    mine = np.zeros(dec.padded_shape)
    mine[dec.interior] = g[dec.start[0]:dec.start[0] + dec.local_shape[0]]
    u.from_numpy(mine)
    dec.exchange(u)
    want = block_of(padded_oracle(g, dec.halo, dec.periodic), dec)
    np.testing.assert_array_equal(u.to_numpy(), want)

    @ti.kernel
    def lower_halo_sum(u: ti.template()) -> ti.f64:
        s = 0.0
        for j in range(u.shape[1]):
            s += u[0, j]
        return s
    assert lower_halo_sum(u) == want[0].sum()

    v = ti.Vector.field(2, ti.f64, shape=dec.padded_shape)
    both = np.stack([mine, -mine], axis=-1)
    v.from_numpy(both)
    dec.exchange(v)
    np.testing.assert_array_equal(v.to_numpy(), np.stack([want, -want], axis=-1))
    np.testing.assert_array_equal(dec.gather(v), np.stack([g, -g], axis=-1))

    nd = ti.ndarray(ti.f64, shape=dec.padded_shape)
    nd.from_numpy(mine)
    dec.exchange(nd)
    np.testing.assert_array_equal(nd.to_numpy(), want)


def check_reductions(fd, torch, rank, world):
    assert fd.all_reduce(rank + 1, "sum") == world * (world + 1) // 2
    assert fd.all_reduce(float(rank) + 0.5, "max") == world - 0.5
    assert isinstance(fd.all_reduce(np.float32(0.25), "sum"), float)
    t = fd.all_reduce(torch.tensor([rank, -rank]), "max")
    assert t.tolist() == [world - 1, 0]


def run(rank, world, path):
    import torch
    import torch.distributed as dist
    import fluxion as ti
    import fluxion.distributed as fd
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world)
    ti.init(arch=ti.cpu, cpu_max_num_threads=1)
    try:
        check_exchange(fd, torch, rank)
        check_adjoint(fd, torch, rank)
        check_fields(fd, torch, rank, ti)
        check_reductions(fd, torch, rank, world)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    import torch.multiprocessing as mp
    world, path = int(sys.argv[1]), sys.argv[2]
    mp.spawn(run, args=(world, path), nprocs=world)
    print("all checks passed")
