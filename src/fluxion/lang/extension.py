"""`ti.extension`: the names of optional backend features, as `require=` arguments of tests
and `ti.is_extension_supported` take them. fluxion has no per-backend feature matrix: these
are names only, so that programs and test suites written against the original API load."""
from __future__ import annotations


class Extension:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Extension.{self.name}"


class _Extensions:
    pass


extension = _Extensions()
for _n in ("sparse", "quant", "mesh", "quant_basic", "data64", "adstack", "bls", "assertion",
           "extfunc", "dynamic_index"):
    setattr(extension, _n, Extension(_n))
