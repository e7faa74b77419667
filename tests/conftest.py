"""Shared test setup: every test starts from a fresh CPU runtime and leaves nothing behind.

`ti.init` only records the configuration (the JIT is created lazily on the first launch), so the
fixture is cheap; `ti.reset` drops the fields and compiled kernels of the test.
"""
import pytest

import fluxion as ti


@pytest.fixture(autouse=True)
def _fluxion_runtime():
    ti.init(arch=ti.cpu)
    yield
    ti.reset()
