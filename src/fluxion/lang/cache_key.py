"""The offline cache's key of a kernel instance: a hash of everything its machine code depends
on, computed before compiling (so that a hit compiles nothing).

A kernel is compiled by interpreting its source: Python values reached from it (globals,
closure cells, template arguments, defaults, what plain Python functions called at compile
time read) become constants of the code. The key covers:

* the source text, file and first line of the kernel and of every `ti.func` it reaches
  (through any name, attribute chain, container or object), its annotations and defaults;
* every Python value reached, by value: numbers, strings, containers, numpy arrays (by
  content), types, struct and matrix types, objects (their class, their class's methods and
  their attributes), plain Python functions (their bytecode, defaults, closure cells and the
  globals their code loads);
* fields by layout: dtype, shape, offset, name, gradient and dual fields, and the structure
  of the SNode tree each lives in, with which fields are the same object and which share a
  tree (code built for two different fields assumes they do not overlap);
* the argument types, the configuration that changes code (arch, debug, default_fp/ip,
  fast_math, advanced_optimization, threads, ...), the autodiff mode, and the environment:
  fluxion's own source, Python, numpy, llvmlite and LLVM versions, the CPU and its features.

Anything that cannot be pinned down by value makes the instance uncacheable (it is compiled
as without the cache), never a guess: a C-level object whose state Python cannot see (a
torch tensor, a random generator), a module that is not a known pure library, a builtin such
as `id` or `hash`, a function whose source is unavailable. What the compiler itself notices
at build time (a field's data read or written in Python scope during the build, `static_print`)
is checked by the build (`builder.taint`).

Library code (fluxion itself, numpy, math) is keyed by name: fluxion's source is part of the
environment hash, and the others' versions are.
"""
from __future__ import annotations

import functools
import hashlib
import types as pytypes

import numpy as np

from fluxion.ir.types import DataType
from fluxion.lang.cache_code import CodeKeys, Uncacheable, _trusted_module
from fluxion.lang import kernel as kernel_mod   # (a module: kernel imports this one)
from fluxion.lang import sparse_pool
from fluxion.lang.decorated import Func
from fluxion.lang.field import Field
from fluxion.lang.snode import FieldsBuilder, Place, PlaceSNode, SNode, SNodeTree, Tree
from fluxion.lang.struct import StructField
from fluxion.runtime import offline_cache

# the key's format and the process's environment (versions, CPU, fluxion's source) are the
# store's: the thread pool's cached code depends on them too
FORMAT = offline_cache.KEY_FORMAT
environment = offline_cache.environment


# the most tokens one key may take (a template argument holding a huge structure): beyond it
# the instance is not cached
MAX_TOKENS = 200_000
MAX_ARRAY_BYTES = 16 << 20


# builtins that are functions of their arguments
_PURE_BUILTINS = frozenset("""abs all any ascii bin bool bytes callable chr complex dict divmod
enumerate filter float format frozenset getattr hasattr hex int isinstance issubclass iter len
list map max min next oct ord pow print range repr reversed round set slice sorted str sum tuple
type zip object super property staticmethod classmethod NotImplemented Ellipsis""".split())

_HEAPTYPE = 1 << 9


def _fluxion_types():
    return Field, Func, kernel_mod.Kernel, SNode, Tree, StructField, DataType


def _tree_of_handle(v):
    """The Tree (or field) that an SNodeTree, a FieldsBuilder or a field's place (`x.snode`)
    stands for, else None."""
    if isinstance(v, (SNodeTree, FieldsBuilder)):
        return v._tree
    if isinstance(v, PlaceSNode):
        return v._field
    return None


class Fingerprint(CodeKeys):
    """One key computation. `fields` lists the fields reached, in a deterministic order (the
    order the same program reaches them in any process): cached code names the trees it
    addresses by a field of this list (see kernel_cache.py)."""

    def __init__(self):
        (self.Field, self.Func, self.Kernel, self.SNode, self.Tree, self.StructField,
         self.DataType) = _fluxion_types()
        self.out = []
        self.memo = {}            # id(obj) -> index: identity (aliasing) is part of the key
        self.keep = []            # what `memo` holds ids of stays alive during the walk
        self.fields = []          # Field objects in order of first encounter
        self.snodes = []          # SNodes (of fields and values) in order of encounter
        self.trees = {}           # id(Tree) -> index
        self.func_chains = {}
        self.shadowed = set()     # (id(SourceInfo), name): locals whose globals are not keyed

    # -- output ---------------------------------------------------------------------------
    def put(self, *parts):
        out = self.out
        out.extend(parts)
        if len(out) > MAX_TOKENS:
            raise Uncacheable("too much to fingerprint")

    def digest(self):
        h = hashlib.blake2b(digest_size=20)
        h.update("\x1f".join(map(str, self.out)).encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def _seen(self, obj, tag):
        """True (and a back-reference written) if `obj` was fingerprinted already; else it is
        numbered for later references."""
        k = id(obj)
        idx = self.memo.get(k)
        if idx is not None:
            self.put("ref", idx)
            return True
        self.memo[k] = len(self.memo)
        self.keep.append(obj)
        self.put(tag)
        return False

    # -- values ---------------------------------------------------------------------------
    def value(self, v):
        t = type(v)
        if v is None or t is bool or t is int or t is str or t is bytes:
            self.put(t.__name__, repr(v))
            return
        if t is float or t is complex:
            self.put(t.__name__, repr(v))
            return
        if t is tuple:
            self.put("(", len(v))
            for x in v:
                self.value(x)
            self.put(")")
            return
        if t is list:
            if not self._seen(v, "["):
                self.put(len(v))
                for x in v:
                    self.value(x)
                self.put("]")
            return
        if t is dict:
            if not self._seen(v, "{"):
                self._dict_items(v)
            return
        if t is set or t is frozenset:
            self._set(v)
            return
        if v is Ellipsis or v is NotImplemented:
            self.put(repr(v))
            return
        if t is slice:
            self.put("slice")
            self.value((v.start, v.stop, v.step))
            return
        if isinstance(v, self.Field):
            self.field(v)
            return
        if isinstance(v, self.DataType):
            self.put("dt", v.name)
            return
        if isinstance(v, self.Func):
            self.func(v)
            return
        if isinstance(v, self.Kernel):
            self.put("kernel", getattr(v.func, "__module__", ""), v.func.__qualname__)
            return
        if isinstance(v, self.StructField):
            self.struct_field(v)
            return
        if isinstance(v, self.SNode):
            self.snode(v)
            return
        if isinstance(v, self.Tree):
            # a tree (of a FieldsBuilder / SNodeTree) by its structure, not its memory
            self.put("tree-of")
            self.snode(v.root)
            return
        tree = _tree_of_handle(v)
        if tree is not None:          # SNodeTree, FieldsBuilder, a field's place (x.snode)
            self.put(type(v).__name__)
            self.value(tree)
            return
        if isinstance(v, np.ndarray):
            self.array(v)
            return
        if isinstance(v, np.generic):
            self.put("np", v.dtype.str, repr(v.item()))
            return
        if isinstance(v, np.dtype):
            self.put("npdt", v.str)
            return
        if t is pytypes.ModuleType:
            if not _trusted_module(v.__name__):
                raise Uncacheable(f"module {v.__name__}")
            self.put("mod", v.__name__)
            return
        if t is pytypes.FunctionType:
            self.pyfunc(v)
            return
        if t is pytypes.BuiltinFunctionType:
            self.builtin(v)
            return
        if t is pytypes.MethodType:
            if not self._seen(v, "meth"):
                self.value(v.__func__)
                self.value(v.__self__)
            return
        if isinstance(v, np.ufunc):
            self.put("ufunc", v.__name__)
            return
        if isinstance(v, type):
            self.klass(v)
            return
        if t is functools.partial:
            self.put("partial")
            self.value(v.func)
            self.value(v.args)
            self.value(v.keywords)
            return
        if t is staticmethod or t is classmethod:
            self.put(t.__name__)
            self.value(v.__func__)
            return
        if t is property:
            self.put("property")
            self.value((v.fget, v.fset, v.fdel))
            return
        if _trusted_module(t.__module__) and callable(v) and \
                _trusted_module(getattr(v, "__module__", None)) and \
                isinstance(getattr(v, "__qualname__", None), str):
            # a library's function object of its own type (numpy's array-function
            # dispatchers: np.clip, np.sum, ...)
            self.put("lcall", v.__module__, v.__qualname__)
            return
        self.instance(v)

    def _dict_items(self, d):
        self.put(len(d))
        for k, x in d.items():
            self.value(k)
            self.value(x)
        self.put("}")

    def _set(self, v):
        items = []
        for x in v:
            if type(x) not in (int, float, str, bytes, bool, type(None)):
                raise Uncacheable("a set of objects (its order is the process's)")
            items.append(repr(x))
        self.put("set", len(items), *sorted(items))

    def array(self, a):
        if a.dtype.hasobject:
            raise Uncacheable("an object array")
        if a.nbytes > MAX_ARRAY_BYTES:
            raise Uncacheable("a large array")
        if not self._seen(a, "nd"):
            data = np.ascontiguousarray(a).tobytes()
            self.put(a.dtype.str, repr(a.shape),
                     hashlib.blake2b(data, digest_size=16).hexdigest())

    def builtin(self, f):
        owner = getattr(f, "__self__", None)
        if owner is None or isinstance(owner, pytypes.ModuleType):
            mod = getattr(f, "__module__", None) or getattr(owner, "__name__", None)
            if mod == "builtins":
                if f.__name__ not in _PURE_BUILTINS:
                    raise Uncacheable(f"builtin {f.__name__}")
            elif not _trusted_module(mod):
                raise Uncacheable(f"function {mod}.{f.__name__}")
            self.put("bfn", mod, f.__name__)
            return
        # a method of a C object (list.append of a global list, a generator's random()):
        # keyed by the object
        self.put("bmeth", f.__name__)
        self.value(owner)

    def klass(self, c):
        mod = getattr(c, "__module__", None)
        if _trusted_module(mod):
            self.put("cls", mod, c.__qualname__)
            return
        if self._seen(c, "ucls"):
            return
        if not c.__flags__ & _HEAPTYPE:
            raise Uncacheable(f"class {c!r}")
        self.put(mod, c.__qualname__)
        for b in c.__bases__:
            self.klass(b)
        meta = type(c)
        if meta is not type:
            self.klass(meta)
        for k, x in c.__dict__.items():
            if k in _CLASS_SKIP:
                continue
            self.put(k)
            self.value(x)
        self.put("/ucls")

    def instance(self, v):
        t = type(v)
        if self._seen(v, "obj"):
            return
        self.klass(t)
        # state that Python cannot see (a C base class: a tensor's data, a generator's
        # state) would not be in the key
        for c in t.__mro__:
            if c is object:
                continue
            if not c.__flags__ & _HEAPTYPE:
                if c in (int, float, str, bytes, complex) and isinstance(v, c):
                    self.put("base", c.__name__, repr(c(v)))
                    continue
                if c is dict and isinstance(v, dict):
                    self._dict_items(v)
                    continue
                if c in (list, tuple) and isinstance(v, (list, tuple)):
                    self.value(list(v))
                    continue
                raise Uncacheable(f"an object of {t.__module__}.{t.__qualname__}")
        d = getattr(v, "__dict__", None)
        if d is not None:
            self.put("dict")
            self._dict_items(d)
        for c in t.__mro__:
            for name in c.__dict__.get("__slots__", ()) if isinstance(
                    c.__dict__.get("__slots__", ()), (tuple, list)) else ():
                if name in ("__dict__", "__weakref__"):
                    continue
                self.put("slot", name)
                try:
                    x = object.__getattribute__(v, name)
                except AttributeError:
                    self.put("unset")
                    continue
                self.value(x)
        self.put("/obj")

    # -- fields ---------------------------------------------------------------------------
    def field(self, f):
        if self._seen(f, "field"):
            return
        self.fields.append(f)
        self.put(type(f).__name__, f.dtype.name, f.name, f.n, f.m,
                 getattr(f, "ndim", None), repr(f.offset), f.is_grad)
        sn = f._snode
        if sn is None or any(p is None for p in f.places):
            self.put("unplaced")
        else:
            for p in f.places:
                # (a quantized field's components may sit in several snodes)
                self.snode(p.snode)
                self.put("place", *_place_position(p))
        # (the twins as they are: reading `.grad` would make one, and a twin has its own)
        for kind in ("grad", "dual"):
            twin = f.__dict__["_" + kind] if "_" + kind in f.__dict__ else getattr(f, kind)
            self.put(kind)
            if twin is not None:
                self.field(twin)
        self.put("/field")

    def struct_field(self, sf):
        if self._seen(sf, "sfield"):
            return
        self.value(sf.stype)
        self.put(sf.name)
        for k, f in sf.fields.items():
            self.put(k)
            self.value(f)
        self.put("/sfield")

    def snode(self, sn):
        self.snodes.append(sn)
        tree = sn.tree
        if tree is None:
            self.put("root")
            return
        idx = self.trees.get(id(tree))
        if idx is None:
            idx = self.trees[id(tree)] = len(self.trees)
            self.keep.append(tree)
            self.put("tree", idx)
            self._tree_structure(tree.root)
        else:
            self.put("tree", idx)
        # the path from the tree's root
        path = []
        s = sn
        while s is not tree.root and s.up is not None:
            path.append(s.up.children.index(s))
            s = s.up
        self.put("path", *path[::-1])

    def _tree_structure(self, node):
        """The layout-defining structure of a tree: levels, their kinds and extents, and each
        place's dtype (and, quantized, its storage: type, word, bit offset, sharing)."""
        self.put("sn", type(node).__name__, repr(node.axes), repr(node.extents),
                 len(node.children))
        kind = getattr(node, "kind", "dense")
        if kind != "dense":
            # (its code reads and writes hidden state fields, which lang/kernel_cache.py's
            # recipes find again from the fields; a pointer's blocks may come from a pool)
            self.put("sparse", kind, getattr(node, "chunk_size", None) if kind == "dynamic"
                     else None, sparse_pool.ENABLED if kind == "pointer" else None)
        word = getattr(node, "word", None)
        if word is not None:
            self.put("word", word.name)
        for c in node.children:
            if isinstance(c, Place):
                self.put("p", c.dtype.name, *_slot_tokens(c.quant))
            elif isinstance(c, SNode):
                self._tree_structure(c)
            elif hasattr(c, "places"):          # a word of bit-packed places
                self.put("w", c.dtype.name, len(c.places))
                for p in c.places:
                    self.put("p", p.dtype.name, *_slot_tokens(p.quant))
            else:
                raise Uncacheable(f"an SNode child {type(c).__name__}")
        self.put("/sn")

def _place_position(p):
    """Where a place sits in its snode: (child index,) or, inside a word of bit-packed places,
    (child index, index in the word)."""
    for k, c in enumerate(p.snode.children):
        if c is p:
            return (k,)
        places = getattr(c, "places", None)
        if isinstance(places, list):
            for j, q in enumerate(places):
                if q is p:
                    return (k, j)
    raise Uncacheable("a place not found in its snode")


def _slot_tokens(slot):
    """A quantized place's storage (lang/quant.QuantSlot), as tokens; () for a plain place."""
    if slot is None:
        return ()
    q = slot.qtype
    g = slot.group
    return ("q", type(q).__name__, repr(q._key()), slot.word.name, slot.offset, slot.array,
            slot.index, slot.sole, None if g is None else (g.exp, g.exp_offset, len(g.slots)))


_CLASS_SKIP = frozenset(("__dict__", "__weakref__", "__module__", "__doc__", "__qualname__",
                         "__firstlineno__", "__static_attributes__", "__annotations__",
                         "__orig_bases__", "__parameters__"))


# Configuration that never reaches the code: read at launch (random_seed), or about the cache
_CONFIG_SKIP = frozenset(("random_seed", "print_ir", "offline_cache", "offline_cache_file_path",
                          "offline_cache_max_size_of_files", "offline_cache_cleaning_policy",
                          "offline_cache_cleaning_factor"))


def config_tokens(fp, cfg):
    for k in sorted(vars(cfg)):
        if k in _CONFIG_SKIP:
            continue
        v = getattr(cfg, k)
        fp.put("cfg", k)
        try:
            fp.value(v)
        except Uncacheable:
            fp.put("repr", type(v).__qualname__, repr(v))

