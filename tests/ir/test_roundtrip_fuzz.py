"""The IR text round-trips on random programs (tests/fuzz's generators): every kernel of a few
hundred programs, at every stage of the CPU pipeline, prints, parses back into the same IR and
prints the same. Fast: kernels go through the frontend and the passes only; the code
generator is replaced by a stub, and launches do nothing (the values are tests/fuzz's job)."""
import pytest

import fluxion as ti
from fluxion.lang import kernel as K
from fluxion.runtime import jit
from fluxion.ir.errors import FluxionError
from fluxion.ir.modes import Mode

from fuzz import gen, gen_ad, oracles
from ir.irtext import checking_every_stage

pytestmark = pytest.mark.cpu_only

SEEDS = range(300)
AD_SEEDS = range(60)


class _Built(Exception):
    pass


class _NoCodegen:
    def compile(self, ir):
        raise _Built()


class _NoLaunch:
    def launch(self, *args, **kwargs):
        return 0


def _instantiate(self, key, args, specs, mode):
    """Compile up to code generation (every stage round-trips), launch nothing."""
    try:
        self._compile(key, args, specs, mode)
    except _Built:
        pass
    return _NoLaunch()


@pytest.fixture
def frontend_and_passes_only(monkeypatch):
    ti.init(arch=ti.cpu, print_ir=True, offline_cache=False, cpu_max_num_threads=4)
    monkeypatch.setattr(jit, "get_jit", lambda: _NoCodegen())
    monkeypatch.setattr(K.Kernel, "_instantiate", _instantiate)
    with checking_every_stage(monkeypatch) as seen:
        yield seen


def _silently(fn):
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()):
        return fn()


# in chunks: each a test of its own, under the suite's per-test timeout on a loaded machine,
# and short enough that the suite's workers share them out evenly
CHUNKS = 6
AD_CHUNKS = 6


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_programs_round_trip(frontend_and_passes_only, chunk):
    seen = frontend_and_passes_only
    kernels = rejected = 0
    seeds = SEEDS[chunk::CHUNKS]
    for seed in seeds:
        ti.init(arch=ti.cpu, print_ir=True, offline_cache=False, cpu_max_num_threads=4)
        before = len(seen)
        mod, _ = oracles.load(gen.program(seed, gen.Options(taichi=False)))
        try:
            _silently(mod.build(ti))
        except FluxionError:
            rejected += 1       # a program the language rejects (both systems do): its kernels
            continue            # before that one were checked
        assert len(seen) > before, f"seed {seed}: no kernel reached the pipeline"
        kernels += len({name for name, _ in seen[before:]})
    assert rejected < len(seeds) // 10 and kernels >= len(seeds)


@pytest.mark.parametrize("chunk", range(AD_CHUNKS))
def test_random_autodiff_programs_round_trip(frontend_and_passes_only, chunk):
    """The primal, adjoint and dual kernel of every kernel of random differentiable
    programs."""
    seen = frontend_and_passes_only
    for seed in AD_SEEDS[chunk::AD_CHUNKS]:
        ti.init(arch=ti.cpu, print_ir=True, offline_cache=False, cpu_max_num_threads=4)
        mod, _ = oracles.load(gen_ad.program(seed))
        run = mod.build(ti)
        kernels = [c.cell_contents for c in run.primal.__closure__
                   if isinstance(c.cell_contents, K.Kernel)]
        assert kernels, f"seed {seed}: no kernel found"
        run.init()
        before = len(seen)
        for k in kernels:
            specs = k._arg_specs or k._specs()
            for mode in (Mode.PRIMAL, Mode.GRAD, Mode.DUAL):
                key = () if mode is Mode.PRIMAL else (mode, 0)
                try:
                    _silently(lambda: k._compile(key, (), specs, mode))
                except _Built:
                    pass
        names = {name for name, _ in seen[before:]}
        for k in kernels:
            assert {k.name, k.name + ".grad", k.name + ".dual"} <= names, (seed, names)
