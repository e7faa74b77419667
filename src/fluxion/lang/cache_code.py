"""The part of the offline cache's key (cache_key.py) that covers code: the source of kernels
and `ti.func`s with the name and attribute chains their bodies load, and the bytecode,
defaults, closure cells and globals of plain Python functions called at compile time; and
which library modules are keyed by name."""
from __future__ import annotations

import ast
import builtins
import dis
import functools
import types as pytypes


class Uncacheable(Exception):
    """Raised inside the fingerprint: the instance is compiled and not cached."""


# Modules whose functions and classes are keyed by name: they compute the same thing for the
# same arguments in every process of the same versions (those are in the environment hash).
_TRUSTED_ROOTS = ("fluxion", "numpy", "math", "cmath", "operator", "functools", "itertools",
                  "numbers", "builtins", "abc", "typing", "enum", "dataclasses", "collections")
# ... except these: random, or code a user writes (the examples' build functions)
_UNTRUSTED = ("numpy.random", "fluxion.examples")

def _trusted_module(name):
    if not name:
        return False
    if any(name == u or name.startswith(u + ".") for u in _UNTRUSTED):
        return False
    root = name.split(".", 1)[0]
    return root in _TRUSTED_ROOTS



class CodeKeys:
    """The methods of the Fingerprint (cache_key.py) that key functions and code; they put
    tokens and key the values code reaches through the Fingerprint's own `put`/`value`."""

    def func(self, f):
        fn = f.func
        mod = getattr(fn, "__module__", "")
        if _trusted_module(mod) and fn.__closure__ is None:
            self.put("lfunc", mod, fn.__qualname__)
            return
        if self._seen(f, "func"):
            return
        self.source_function(f, fn, bindings=None)
        self.put("/func")

    def source_function(self, dec, fn, bindings):
        """A kernel's or ti.func's source, annotations, defaults and every name its body
        loads. `bindings`: the kernel's parameters with compile-time values (templates);
        None for a ti.func (its parameters are the caller's values, keyed where they came
        from)."""
        try:
            src = dec.source()
        except (OSError, TypeError) as e:
            raise Uncacheable(f"no source: {e}") from None
        self.put(src.file, src.first_line, src.text)
        hints = dec.hints()
        self.put("hints", len(hints))
        for k, ann in hints.items():
            self.put(k)
            self.value(ann)
        self.value(fn.__defaults__)
        self.value(fn.__kwdefaults__)
        g = dec.globals()
        params, stored, chains = self._chains(dec, src)
        bound = bindings or {}
        for chain in chains:
            root = chain[0]
            if root in params:
                if root not in bound:
                    continue         # a kernel value, or the caller's (keyed there)
                v = bound[root]
            elif root in stored:
                # a local name (assigned in the body): its values are keyed where they come
                # from. The build could still read a global of that name before the first
                # assignment; it notes what it reads outside the function's scope, and a build
                # that read such a name is not cached (kernel_cache.py)
                self.shadowed.add((id(src), root))
                continue
            elif root in g:
                v = g[root]
            elif hasattr(builtins, root):
                v = getattr(builtins, root)
            else:
                self.put("undefined", root)
                continue
            self.put("chain", *chain)
            for attr in chain[1:]:
                try:
                    v = getattr(v, attr)
                except Exception as e:     # the build will raise the same, or not use it
                    self.put("attrerror", type(e).__name__)
                    break
            else:
                try:
                    self.value(v)
                except Uncacheable as e:
                    if e.args and " (through " not in e.args[0]:
                        raise Uncacheable(f"{e.args[0]} (through `{'.'.join(chain)}` in "
                                          f"{getattr(fn, '__qualname__', '?')})") from None
                    raise

    def _chains(self, dec, src):
        """(parameters, locally assigned names, name/attribute chains the body loads),
        computed once per function."""
        hit = self.func_chains.get(id(src))
        if hit is not None:
            return hit
        cached = getattr(src, "_cache_chains", None)
        if cached is None:
            cached = _analyze(src.tree)
            src._cache_chains = cached
        self.func_chains[id(src)] = cached
        return cached

    def pyfunc(self, f):
        mod = getattr(f, "__module__", None)
        if _trusted_module(mod) and f.__closure__ is None:
            self.put("fn", mod, f.__qualname__)
            return
        if self._seen(f, "pyfn"):
            return
        self.put(mod, f.__qualname__)
        self.code(f.__code__, f.__globals__)
        self.value(f.__defaults__)
        self.value(f.__kwdefaults__)
        if f.__closure__:
            for name, cell in zip(f.__code__.co_freevars, f.__closure__):
                self.put("cell", name)
                try:
                    self.value(cell.cell_contents)
                except ValueError:
                    self.put("empty")
        d = getattr(f, "__dict__", None)
        if d:
            self.put("fdict")
            self._dict_items({k: x for k, x in d.items() if k != "__wrapped__"})
        self.put("/pyfn")

    def code(self, co, g):
        """Bytecode (the code Python runs at compile time), its constants and what it loads
        from globals (an attribute chain from a global is followed, its end keyed)."""
        self.put("code", co.co_code.hex(), co.co_argcount, co.co_posonlyargcount,
                 co.co_kwonlyargcount, co.co_flags, repr(co.co_names), repr(co.co_varnames),
                 repr(co.co_freevars), repr(co.co_cellvars))
        for c in co.co_consts:
            if isinstance(c, pytypes.CodeType):
                self.code(c, g)
            else:
                self.value(c)
        chain = None
        for ins in _instructions(co):
            op = ins.opname
            if op in ("LOAD_GLOBAL", "LOAD_NAME"):
                self._code_chain(chain, g)
                chain = [ins.argval]
            elif op in ("LOAD_ATTR", "LOAD_METHOD") and chain is not None:
                chain.append(ins.argval)
            else:
                self._code_chain(chain, g)
                chain = None
                if op == "IMPORT_NAME":
                    if not _trusted_module(ins.argval):
                        raise Uncacheable(f"imports {ins.argval}")
                elif op == "IMPORT_FROM" and ins.argval == "random":
                    raise Uncacheable("imports random")
        self._code_chain(chain, g)

    def _code_chain(self, chain, g):
        if not chain:
            return
        root = chain[0]
        if root in g:
            v = g[root]
        elif hasattr(builtins, root):
            v = getattr(builtins, root)
        else:
            self.put("undefined", root)
            return
        self.put("gchain", *chain)
        for attr in chain[1:]:
            try:
                v = getattr(v, attr)
            except Exception as e:
                self.put("attrerror", type(e).__name__)
                return
        self.value(v)


@functools.lru_cache(maxsize=4096)
def _instructions(co):
    return tuple(dis.get_instructions(co))


def _analyze(fdef):
    """(parameter names, names assigned anywhere in the body, maximal Name.attr... chains
    loaded in the body in source order)."""
    a = fdef.args
    params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    if a.vararg:
        params.add(a.vararg.arg)
    if a.kwarg:
        params.add(a.kwarg.arg)
    stored = set()
    chains = []

    def chain_of(node):
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            parts.append(node.id)
            return parts[::-1]
        return None

    def visit(node):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                chains.append((node.id,))
            else:
                stored.add(node.id)
            return
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            c = chain_of(node)
            if c is not None:
                chains.append(tuple(c))
                return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stored.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            pass
        elif isinstance(node, ast.alias):
            stored.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            stored.add(node.arg)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for st in fdef.body:
        visit(st)
    # decorators and annotations of the function itself are keyed as values (hints)
    return params, stored, tuple(dict.fromkeys(chains))
