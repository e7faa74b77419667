"""The classic simulations: physical invariants and NumPy references."""
import numpy as np
import pytest

import fluxion as ti


@pytest.fixture(autouse=True)
def _session():
    ti.init(arch=ti.cpu, random_seed=0)
    yield
    ti.reset()


def test_mpm88_conserves_mass_and_keeps_particles_in_the_box():
    from fluxion.examples.mpm88 import build
    sim = build(ti, n_particles=1024, n_grid=32, dt=4e-4)
    sim["init"]()
    total = sim["p_mass"] * sim["n_particles"]
    for _ in range(100):
        sim["substep"]()
        assert sim["grid_m"].to_numpy().sum() == pytest.approx(total, rel=1e-4)
    x = sim["x"].to_numpy()
    assert np.isfinite(x).all() and ((x > 0) & (x < 1)).all()
    assert x[:, 1].mean() < 0.4        # it fell from its starting height (mean 0.4)


def test_julia_set_matches_numpy():
    from fluxion.examples.julia import build, numpy_iterations
    n = 64
    _, iters, paint = build(ti, n)
    paint(0.3)
    k = iters.to_numpy()
    ref = numpy_iterations(n, 0.3)
    # float32 rounding may move a few boundary points by an iteration
    assert np.mean(k != ref) < 0.01
    assert np.abs(k - ref).max() <= 50 and np.mean(np.abs(k - ref)) < 0.05


def test_game_of_life_matches_numpy():
    from fluxion.examples.game_of_life import build, numpy_step
    n = 48
    alive, step = build(ti, n)
    a = (np.random.default_rng(1).random((n, n)) < 0.35).astype(np.int32)
    alive.from_numpy(a)
    for _ in range(12):
        step()
        a = numpy_step(a)
        np.testing.assert_array_equal(alive.to_numpy(), a)


def test_nbody_conserves_momentum():
    from fluxion.examples.nbody import build
    n = 128
    sim = build(ti, n, dt=1e-4)
    rng = np.random.default_rng(2)
    sim["x"].from_numpy(rng.random((n, 2)))
    sim["v"].from_numpy(rng.standard_normal((n, 2)) * 0.1)
    sim["m"].from_numpy(rng.uniform(0.5, 1.5, n) / n)
    sim["accelerations"]()
    sim["measure"]()
    p0, e0 = sim["momentum"][None].to_numpy(), sim["energy"][None]
    for _ in range(50):
        sim["step"]()
    sim["measure"]()
    np.testing.assert_allclose(sim["momentum"][None].to_numpy(), p0, atol=1e-12)
    assert abs(sim["energy"][None] - e0) < 1e-3 * abs(e0)


def test_stable_fluids_projection_reduces_divergence():
    from fluxion.examples.stable_fluids import build
    sim = build(ti, 48, jacobi_iters=80)
    drops = [sim["step"](k * 0.03) for k in range(15)]
    assert all(after < 0.7 * before for before, after in drops[3:])
    d = sim["dye"].to_numpy()
    assert np.isfinite(d).all() and d.max() <= 1.0 + 1e-5 and d.sum() > 0


def test_fem_with_autodiff_forces_conserves_energy():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    from fluxion.examples.fem import build
    sim = build(ti, 6)
    sim["init"](0.3)
    e0 = sim["total_energy"]()
    energies = []
    for _ in range(200):
        sim["step"]()
    energies.append(sim["total_energy"]())
    assert abs(energies[-1] - e0) < 1e-3 * abs(e0)
    x = sim["x"].to_numpy()
    assert np.isfinite(x).all()


def test_mpm_materials_conserve_mass():
    from fluxion.examples.mpm_materials import build
    sim = build(ti, n_particles=900, n_grid=32, dt=2e-4)
    sim["init"]()
    total = sim["p_mass"] * sim["n_particles"]
    for _ in range(60):
        sim["substep"]()
    assert sim["grid_m"].to_numpy().sum() == pytest.approx(total, rel=1e-4)
    x = sim["x"].to_numpy()
    assert np.isfinite(x).all() and ((x > 0) & (x < 1)).all()
    sim["measure"]()
    assert sim["momentum"][None][1] < 0          # everything falls


def _numpy_fluids_step(vel, dye, t, n, dt, jacobi_iters, p):
    """One step of the stable-fluids example, written again with NumPy (float64)."""
    idx = np.arange(n)
    ci, cj = np.meshgrid(idx, idx, indexing="ij")

    def at(f, i, j):
        return f[np.clip(i, 0, n - 1), np.clip(j, 0, n - 1)]

    def advect(src, v):
        bx = ci + 0.5 - dt * n * v[..., 0] - 0.5
        by = cj + 0.5 - dt * n * v[..., 1] - 0.5
        i0, j0 = np.floor(bx).astype(int), np.floor(by).astype(int)
        s, u = bx - i0, by - j0
        if src.ndim == 3:
            s, u = s[..., None], u[..., None]
        return ((at(src, i0, j0) * (1 - s) + at(src, i0 + 1, j0) * s) * (1 - u)
                + (at(src, i0, j0 + 1) * (1 - s) + at(src, i0 + 1, j0 + 1) * s) * u)

    def divergence(v):
        l, r = at(v, ci - 1, cj)[..., 0], at(v, ci + 1, cj)[..., 0]
        b, tp = at(v, ci, cj - 1)[..., 1], at(v, ci, cj + 1)[..., 1]
        l[0, :], r[-1, :] = -v[0, :, 0], -v[-1, :, 0]
        b[:, 0], tp[:, -1] = -v[:, 0, 1], -v[:, -1, 1]
        return 0.5 * (r - l + tp - b)

    vel = advect(vel, vel)
    dye = advect(dye, vel)
    dx = (ci + 0.5) / n - 0.5 - 0.1 * np.sin(np.float32(t) * 2)
    dy = (cj + 0.5) / n - 0.08
    jet = dx * dx + dy * dy < 0.0025
    vel[jet] = [0.0, 1.0]
    dye[jet] = 1.0
    div = divergence(vel)
    before = np.sqrt((div ** 2).sum())
    for _ in range(jacobi_iters):
        p = (at(p, ci - 1, cj) + at(p, ci + 1, cj) + at(p, ci, cj - 1) + at(p, ci, cj + 1)
             - div) * 0.25
    grad = np.stack([at(p, ci + 1, cj) - at(p, ci - 1, cj), at(p, ci, cj + 1) - at(p, ci, cj - 1)],
                    -1)
    vel = vel - 0.5 * grad
    after = np.sqrt((divergence(vel) ** 2).sum())
    return vel, dye, p, before, after


def test_stable_fluids_steps_match_numpy():
    from fluxion.examples.stable_fluids import build
    n, dt, iters = 32, 0.03, 20
    sim = build(ti, n, dt=dt, jacobi_iters=iters)
    vel = np.zeros((n, n, 2))
    dye = np.zeros((n, n))
    p = np.zeros((n, n))
    for k in range(6):
        before, after = sim["step"](k * 0.03)
        vel, dye, p, ref_before, ref_after = _numpy_fluids_step(vel, dye, k * 0.03, n, dt, iters,
                                                                p)
        assert before == pytest.approx(ref_before, rel=1e-4, abs=1e-5)
        assert after == pytest.approx(ref_after, rel=1e-3, abs=1e-5)
    np.testing.assert_allclose(sim["vel"].to_numpy(), vel, atol=1e-4)
    np.testing.assert_allclose(sim["dye"].to_numpy(), dye, atol=1e-4)
    assert dye.max() == pytest.approx(1.0) and vel[..., 1].max() > 0.5   # a jet, not nothing


def _numpy_mpm88_substep(x, v, C, J, n_grid, dt):
    """One substep of the 88-line MLS-MPM example, written again with NumPy (float64)."""
    dx = 1 / n_grid
    p_vol = (dx * 0.5) ** 2
    p_mass, gravity, bound, E = p_vol, 9.8, 3, 400
    gv = np.zeros((n_grid, n_grid, 2))
    gm = np.zeros((n_grid, n_grid))
    Xp = x / dx
    base = (Xp - 0.5).astype(int)
    fx = Xp - base
    w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
    stress = -dt * 4 * E * p_vol * (J - 1) / dx ** 2
    affine = stress[:, None, None] * np.eye(2) + p_mass * C
    for i in range(3):
        for j in range(3):
            off = np.array([i, j])
            dpos = (off - fx) * dx
            weight = w[i][:, 0] * w[j][:, 1]
            node = (base[:, 0] + i, base[:, 1] + j)
            mom = p_mass * v + np.einsum("pab,pb->pa", affine, dpos)
            np.add.at(gv, node, weight[:, None] * mom)
            np.add.at(gm, node, weight * p_mass)
    has = gm > 0
    gv[has] /= gm[has][:, None]
    gv[..., 1] -= dt * gravity
    gi, gj = np.meshgrid(np.arange(n_grid), np.arange(n_grid), indexing="ij")
    gv[..., 0][(gi < bound) & (gv[..., 0] < 0)] = 0
    gv[..., 0][(gi > n_grid - bound) & (gv[..., 0] > 0)] = 0
    gv[..., 1][(gj < bound) & (gv[..., 1] < 0)] = 0
    gv[..., 1][(gj > n_grid - bound) & (gv[..., 1] > 0)] = 0
    new_v = np.zeros_like(v)
    new_C = np.zeros_like(C)
    for i in range(3):
        for j in range(3):
            dpos = (np.array([i, j]) - fx) * dx
            weight = w[i][:, 0] * w[j][:, 1]
            g = gv[base[:, 0] + i, base[:, 1] + j]
            new_v += weight[:, None] * g
            new_C += 4 * weight[:, None, None] * np.einsum("pa,pb->pab", g, dpos) / dx ** 2
    x = x + dt * new_v
    J = J * (1 + dt * (new_C[:, 0, 0] + new_C[:, 1, 1]))
    return x, new_v, new_C, J, gm


def test_mpm88_substeps_match_numpy():
    from fluxion.examples.mpm88 import build
    n, n_grid, dt = 512, 32, 4e-4
    sim = build(ti, n_particles=n, n_grid=n_grid, dt=dt)
    sim["init"]()
    x = sim["x"].to_numpy().astype(np.float64)
    v = sim["v"].to_numpy().astype(np.float64)
    C = np.zeros((n, 2, 2))
    J = np.ones(n)
    for _ in range(300):                       # it falls 0.1 and meets the floor
        sim["substep"]()
        x, v, C, J, gm = _numpy_mpm88_substep(x, v, C, J, n_grid, dt)
    np.testing.assert_allclose(sim["grid_m"].to_numpy(), gm, atol=1e-6)
    np.testing.assert_allclose(sim["x"].to_numpy(), x, atol=1e-4)
    np.testing.assert_allclose(sim["v"].to_numpy(), v, atol=2e-3)
    np.testing.assert_allclose(sim["J"].to_numpy(), J, atol=1e-3)
    assert np.abs(J - 1).max() > 1e-2          # the fluid was compressed on impact


def test_mpm_materials_behave_as_fluid_jelly_and_snow():
    from fluxion.examples.mpm_materials import build
    sim = build(ti, n_particles=1500, n_grid=48, dt=2e-4)
    sim["init"]()
    mat = sim["material"].to_numpy()
    assert sorted(np.bincount(mat)) == [500, 500, 500]
    fluid, jelly, snow = (mat == 0), (mat == 1), (mat == 2)
    for _ in range(500):                        # the fluid has landed; the others still fall
        sim["substep"]()
    x = sim["x"].to_numpy()
    assert np.ptp(x[fluid, 0]) > 0.6            # it spread over the floor (it began 0.2 wide)
    assert np.ptp(x[jelly], axis=0).max() < 0.25
    for _ in range(1000):                       # jelly and snow have landed too
        sim["substep"]()
    x, F, Jp = sim["x"].to_numpy(), sim["F"].to_numpy(), sim["Jp"].to_numpy()
    assert np.isfinite(x).all() and ((x > 0) & (x < 1)).all()
    # fluid keeps only its volume: F = sqrt(J) I; no plastic history outside snow
    np.testing.assert_allclose(F[fluid][:, 0, 1], 0, atol=1e-6)
    np.testing.assert_allclose(F[fluid][:, 0, 0], F[fluid][:, 1, 1], rtol=1e-5)
    assert (Jp[fluid] == 1).all() and (Jp[jelly] == 1).all()
    # snow's singular values stay in the plastic limits, and it was compressed plastically
    sig = np.linalg.svd(F[snow], compute_uv=False)
    assert sig.min() >= 1 - 2.5e-2 - 1e-4 and sig.max() <= 1 + 4.5e-3 + 1e-4
    assert np.mean(np.abs(Jp[snow] - 1) > 1e-3) > 0.5
    # jelly is elastic: sheared and squeezed as it bounces, but still one block
    assert np.abs(F[jelly][:, 0, 1]).max() > 1e-3
    assert np.ptp(x[jelly], axis=0).max() < 0.35


def test_fem_forces_are_the_gradient_of_the_neo_hookean_energy():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64)
    from fluxion.examples.fem import build
    E, nu = 1000.0, 0.3
    mu, lam = E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))
    sim = build(ti, 4, E=E, nu=nu)
    sim["init"](0.3)
    x0, tri = sim["x"].to_numpy(), sim["tri"].to_numpy()

    def edges(x):
        return np.stack([x[tri[:, 1]] - x[tri[:, 0]], x[tri[:, 2]] - x[tri[:, 0]]], axis=-1)

    D0 = edges(x0)
    B, area = np.linalg.inv(D0), np.abs(np.linalg.det(D0)) / 2

    def energy(x):
        F = edges(x) @ B
        J = np.maximum(np.linalg.det(F), 1e-6)
        psi = mu / 2 * (np.einsum("tij,tij->t", F, F) - 2) - mu * np.log(J) \
            + lam / 2 * np.log(J) ** 2
        return (area * psi).sum()

    for _ in range(40):                       # deformed: spinning and stretched
        sim["step"]()
    x = sim["x"].to_numpy()
    sim["step"]()                             # its Tape leaves dE/dx at x in x.grad
    grad = sim["x"].grad.to_numpy()
    h = 1e-6
    fd = np.zeros_like(x)
    for k in range(x.shape[0]):
        for d in range(2):
            xp, xm = x.copy(), x.copy()
            xp[k, d] += h
            xm[k, d] -= h
            fd[k, d] = (energy(xp) - energy(xm)) / (2 * h)
    assert energy(x) > 1e-3                   # there is elastic energy to differentiate
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())
    np.testing.assert_allclose(grad.sum(axis=0), 0, atol=1e-9)   # internal forces cancel


def test_nbody_accelerations_and_leapfrog_match_numpy():
    ti.reset()
    ti.init(arch=ti.cpu, default_fp=ti.f64)   # as the example's main (f64 constants dt, eps2)
    from fluxion.examples.nbody import build
    n, dt, eps2 = 96, 1e-4, 1e-3
    sim = build(ti, n, dt=dt, eps2=eps2)
    rng = np.random.default_rng(5)
    x, v, m = rng.random((n, 2)), rng.standard_normal((n, 2)) * 0.1, rng.uniform(0.5, 1.5, n) / n
    sim["x"].from_numpy(x)
    sim["v"].from_numpy(v)
    sim["m"].from_numpy(m)

    def acc(x):
        d = x[None, :, :] - x[:, None, :]                 # d[i, j] = x_j - x_i
        r2 = (d ** 2).sum(-1) + eps2
        return (m[None, :, None] * d / (r2 * np.sqrt(r2))[..., None]).sum(1)

    sim["accelerations"]()
    a = acc(x)
    for _ in range(20):
        v = v + dt / 2 * a
        x = x + dt * v
        a = acc(x)
        v = v + dt / 2 * a
        sim["step"]()
    np.testing.assert_allclose(sim["x"].to_numpy(), x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sim["v"].to_numpy(), v, rtol=1e-10, atol=1e-12)
    sim["measure"]()
    d = x[None] - x[:, None]
    pot = -0.5 * (m[:, None] * m[None] / np.sqrt((d ** 2).sum(-1) + eps2))
    np.fill_diagonal(pot, 0)
    e = 0.5 * (m * (v ** 2).sum(1)).sum() + pot.sum()
    assert sim["energy"][None] == pytest.approx(e, rel=1e-12)
