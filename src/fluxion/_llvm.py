"""llvmlite's bindings to LLVM (`llvmlite.binding`), loaded when first used.

Loading them opens LLVM's shared library (and the importlib machinery that finds it), about
a sixth of what `import fluxion` cost with them: the largest single part after NumPy. Only
compiling, loading machine code and computing the offline cache's environment need it, so a
process pays for it with its first kernel; the modules that use it name this object instead of
the package: `from fluxion._llvm import llvm`, then `llvm.parse_assembly(...)` as usual. The
first attribute read imports the package; each attribute is then kept on the object, so later
reads cost what a module attribute does. (`llvmlite.ir`, which only builds text, is cheap and
imported directly.)
"""
from __future__ import annotations


class _Binding:
    def __getattr__(self, name):
        # only reached for a name not yet kept: import (once; Python's import lock makes
        # concurrent first uses wait for one load) and keep it
        import llvmlite.binding as binding
        value = getattr(binding, name)
        setattr(self, name, value)
        return value

    def __repr__(self):
        return "<llvmlite.binding, loaded on first use>"


llvm = _Binding()
