"""`ti.lang.impl`: the few entry points of the original system's runtime module that programs
and test suites reach for: `current_cfg()` (the configuration of `ti.init`), `default_cfg()`,
and `get_runtime()` (default types, the number of compiled kernels, materializing fields).
Nothing else of the original's internals is imitated."""
from __future__ import annotations

from fluxion.lang import runtime
from fluxion.ir import types as T
from fluxion.lang.field import all_fields


def current_cfg():
    """The configuration `ti.init` set (`arch`, `default_fp`, `default_ip`, `debug`, ... and
    every other option of `ti.init` as an attribute)."""
    return runtime.config()


def default_cfg():
    """A configuration with every option at its default."""
    return runtime.Config()


class _Program:
    def config(self):
        return runtime.config()


class _Runtime:
    """What `get_runtime()` returns: a view of fluxion's process state."""

    @property
    def prog(self):
        """None before `ti.init` (as in the original), else an object whose `config()` is
        `current_cfg()`."""
        return _Program() if runtime.state().initialized else None

    @property
    def default_fp(self):
        return runtime.config().default_fp

    @default_fp.setter
    def default_fp(self, dtype):
        self.set_default_fp(dtype)

    @property
    def default_ip(self):
        return runtime.config().default_ip

    @default_ip.setter
    def default_ip(self, dtype):
        self.set_default_ip(dtype)

    def set_default_fp(self, dtype):
        dtype = T.normalize(dtype)
        if not dtype.is_float:
            raise TypeError(f"default_fp must be a floating-point type, got {dtype}")
        runtime.ensure_initialized()
        runtime.config().default_fp = dtype

    def set_default_ip(self, dtype):
        dtype = T.normalize(dtype)
        if dtype.is_float:
            raise TypeError(f"default_ip must be an integer type, got {dtype}")
        runtime.ensure_initialized()
        runtime.config().default_ip = dtype

    def get_num_compiled_functions(self):
        """How many kernel instances this session compiled (since the last ti.init/reset).
        fluxion compiles only the user's kernels: `fill`, `to_numpy`, `to_torch`... of fields
        run in Python and add none (the original compiles a kernel for each)."""
        return runtime.state().compiled_count

    def materialize(self):
        """Allocate every field placed so far (fluxion does it on first use anyway)."""
        for f in all_fields():
            if f._snode is not None and f._snode.tree is not None:
                f._snode.tree.materialize()

    def materialize_root_fb(self, is_first_call=True):
        self.materialize()

    @property
    def print_full_traceback(self):
        return runtime.config().print_full_traceback

    @print_full_traceback.setter
    def print_full_traceback(self, value):
        runtime.config().print_full_traceback = bool(value)

    @property
    def short_circuit_operators(self):
        return runtime.config().short_circuit_operators

    @short_circuit_operators.setter
    def short_circuit_operators(self, value):
        runtime.config().short_circuit_operators = bool(value)

    @property
    def unrolling_limit(self):
        return runtime.config().unrolling_limit

    @unrolling_limit.setter
    def unrolling_limit(self, value):
        runtime.config().unrolling_limit = int(value)


_runtime = _Runtime()


def get_runtime():
    return _runtime
