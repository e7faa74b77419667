"""Kernel instances through the offline cache (CPU): look the instance's key up, load its
machine code and launch metadata on a hit, compile and keep them on a miss.

An entry holds the object file (whose field addresses are symbols, one per SNode tree, see
codegen/lower.py) and what the launcher needs: the launch metadata (runtime/kernel_meta.py), how
arguments map to context slots, and, for each tree symbol, a recipe that finds the tree in
this process from the fields the key computation reached (`Fingerprint.fields`: the same
program reaches them in the same order) with the tree's layout, which is checked again
before binding. An entry that does not load for any reason (the file is corrupt, a recipe
finds nothing, a layout differs) is dropped and the kernel compiled: a wrong hit would be a
silently wrong result.
"""
from __future__ import annotations

import json
import os
import sys

from fluxion.autodiff.access_check import mask_of
from fluxion.codegen.layout import CtxLayout
from fluxion.frontend.source import SourceLoc
from fluxion.ir import types as T
from fluxion.ir.modes import Mode
from fluxion.ir.errors import FluxionError
from fluxion.lang import cache_key, runtime, sparse_pool
from fluxion.lang.sparse import mask_of as sparse_mask_of
from fluxion.lang.array_args import pack_array
from fluxion.lang.ndarray import ArrayArg
from fluxion.lang.snode import Place, SNode
from fluxion.runtime import offline_cache, scratch
from fluxion.runtime.args import Checked, MatrixArg, NdarrayArg, ScalarArg, StructArg
from fluxion.runtime.kernel_meta import KernelMeta
from fluxion.runtime.launch import Instance
from fluxion.runtime.offline_cache import enabled


class _NotLoadable(Exception):
    pass


def instantiate(kernel, key, args, specs, mode):
    """The Instance for `key`: loaded from the offline cache, or compiled (and kept for it).
    FLUXION_OFFLINE_CACHE_DEBUG=1 prints how each instance was served (and why one is not
    cached) on stderr."""
    inst = _instantiate(kernel, key, args, specs, mode)
    if os.environ.get("FLUXION_OFFLINE_CACHE_DEBUG"):
        print(f"fluxion offline cache: kernel '{kernel.name}' ({mode.value}): {inst.cache_note}",
              file=sys.stderr)
    return inst


def _instantiate(kernel, key, args, specs, mode):
    cfg = runtime.config()
    store = offline_cache.store_for(cfg) if enabled(cfg) else None
    if store is None:
        inst = kernel._compile(key, args, specs, mode)
        inst.cache_note = "compiled (offline cache off)"
        return inst
    # (the compile of an uncacheable kernel runs outside the handler, so that an error of
    # the user's kernel is not shown as raised while handling the cache's exception)
    uncached = None
    try:
        dkey, fields, shadowed, snodes = instance_key(kernel, key, args, specs, mode)
    except cache_key.Uncacheable as e:
        uncached = f"compiled, not cached: {e}"
    except Exception as e:      # (a bug of the key, or an object whose attributes raise:
        # the cache is an optimization, the kernel is compiled as without it)
        uncached = f"compiled, not cached: the key failed: {type(e).__name__}: {e}"
    if uncached is not None:
        inst = kernel._compile(key, args, specs, mode)
        inst.cache_note = uncached
        return inst
    dropped = ""
    entry = store.get(dkey)
    if entry is not None:
        try:
            inst = _load(kernel, key, specs, mode, entry, fields, snodes)
            inst.cache_note = "loaded"
            inst.cache_key = dkey
            return inst
        except _NotLoadable as e:
            dropped = f" (the entry was dropped: {e})"
            store.discard(dkey)
        except FluxionError:
            raise                    # what compiling would raise too (a field of an ended session)
        except Exception as e:
            dropped = f" (the entry was dropped: {type(e).__name__}: {e})"
            store.discard(dkey)
    inst = kernel._compile(key, args, specs, mode)
    why = _uncacheable_build(inst)
    if why is None and shadowed & inst.outer_reads:
        name = next(iter(shadowed & inst.outer_reads))[1]
        why = f"'{name}' was read from the globals before the function assigned it"
    if why is None:
        try:
            meta = _serialize(kernel, inst, mode, fields, snodes)
        except _NotLoadable as e:
            why = str(e)
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
        else:
            art = inst.compiled.artifact
            store.put(dkey, offline_cache.encode(dkey, cache_key.environment(), kernel.name,
                                                 meta, art.obj))
    inst.cache_note = "compiled" + (f", not cached: {why}" if why else "") + dropped
    inst.cache_key = dkey
    return inst


def _uncacheable_build(inst):
    if inst.build_taint:
        return inst.build_taint
    art = getattr(inst.compiled, "artifact", None)
    if art is None:
        return "no artifact"
    if not art.portable:
        return "the code holds an address"
    return None


def instance_key(kernel, key, args, specs, mode):
    """(hex key, fields reached, globals read before assignment, SNodes reached) of one
    instance; Uncacheable when it cannot be keyed."""
    fp = cache_key.Fingerprint()
    fp.put("fluxion-kernel", cache_key.FORMAT, cache_key.environment(), mode.value)
    cache_key.config_tokens(fp, runtime.config())
    entries = key if mode is Mode.PRIMAL else key[2:]
    bindings = {}
    for pos, ((name, spec), a) in enumerate(zip(specs, args)):
        fp.put("arg", name)
        if spec is None:
            bindings[name] = a
            fp.put("template")
            fp.value(a)
        elif isinstance(spec, NdarrayArg):
            d = entries[pos]
            fp.put("ndarray", d.dtype.name, d.ndim, repr(d.elem_shape), d.contiguous,
                   d.device, d.writable)
        elif isinstance(spec, ScalarArg):
            fp.put("scalar", spec.dtype.name)
        elif isinstance(spec, MatrixArg):
            mt = spec.mtype
            fp.put("matrix", mt.n, mt.m, mt.ndim, spec.dtype.name)
        elif isinstance(spec, StructArg):
            fp.put("struct")
            fp.value(spec.stype)
        else:
            raise cache_key.Uncacheable(f"argument kind {type(spec).__name__}")
    checked = key[-1] if key and type(key[-1]) is Checked else ()
    fp.put("checked", *checked)
    fp.put("kernel")
    fp.source_function(kernel, kernel.func, bindings)
    return fp.digest(), fp.fields, fp.shadowed, fp.snodes


# -- trees: how cached code finds the memory it addresses -------------------------------------
def _place_index(fields):
    """id(place) -> (field index, component) over the fields a key reached."""
    out = {}
    for j, f in enumerate(fields):
        for c, p in enumerate(f.places):
            out.setdefault(id(p), (j, c))
    return out


def _recipes(fields, snodes):
    """id(tree) -> recipe, for every tree the cached code of a kernel over `fields` and
    `snodes` may address: the fields' own, their access masks (Tape validation and
    logging), the per-thread copies the scatter pass made of them, the hidden state fields
    of the sparse levels in their trees and the SNodes', and the SNodes' own trees."""
    places = _place_index(fields)
    out = {}
    for j, f in enumerate(fields):
        for c, p in enumerate(f.places):
            out.setdefault(id(p.snode.tree), ["f", j, c])
        for kind in ("read", "write"):
            m = getattr(f, "_read_mask" if kind == "read" else "_write_mask", None)
            if m is not None and m.places and m.places[0].snode is not None:
                out.setdefault(id(m.places[0].snode.tree), ["m", j, kind])
    walked = set()          # (trees whose sparse levels have their recipes: the first wins)
    for j, f in enumerate(fields):
        for c, p in enumerate(f.places):
            _state_recipes(p.snode, ["s", j, c], out, walked)
    for k, sn in enumerate(snodes):
        if sn.tree is not None:
            out.setdefault(id(sn.tree), ["t", k])
        _state_recipes(sn, ["n", k], out, walked)
    for place, hidden in scratch.buffers().values():
        jc = places.get(id(place)) if place is not None else None
        if jc is not None:
            nthreads = hidden.field.shape[0]
            out.setdefault(id(hidden.snode.tree), ["copy", jc[0], jc[1], nthreads])
    return out


# a sparse level's hidden state fields: its cell states or list lengths (lang/sparse.py), its
# pool's slot table, counts and free stack (lang/sparse_pool.py)
STATES = ("mask", "table", "alloc", "free")


def _state_recipes(s, start, out, walked):
    """The recipes of the hidden state fields of every sparse level in the tree of node `s`
    (a struct-for or a deactivation reaches levels above and below the one it names):
    `start` (how to find `s`: ["s", field, component] for a place's node, ["n", k] for the
    k-th SNode reached) + [the level's path from the tree's root, what]; `walked`: the
    trees done already."""
    if s.tree is None or id(s.tree) in walked:
        return
    walked.add(id(s.tree))

    def visit(node, path):
        if getattr(node, "kind", "dense") != "dense":
            pool = node._pool
            hidden = [node._active_mask] + ([pool.table, pool.alloc, pool.free] if pool else
                                            [None] * 3)
            for what, f in zip(STATES, hidden):
                if f is not None and f.places and f.places[0].snode is not None:
                    out.setdefault(id(f.places[0].snode.tree), start + [path, what])
        for k, c in enumerate(getattr(node, "children", ())):
            if isinstance(c, SNode):
                visit(c, path + [k])
    visit(s.tree.root, [])


def _state_field(node, what):
    """Sparse node `node`'s hidden state field `what` (see STATES), made if need be."""
    if getattr(node, "kind", "dense") == "dense":
        raise _NotLoadable(f"the {what} of a dense node")
    if what == "mask":
        return sparse_mask_of(node)
    pool = sparse_pool.pool_of(node)
    if pool is None or what not in STATES:
        raise _NotLoadable(f"no {what} of a pooled node here")
    sparse_pool.make_fields(pool)
    return getattr(pool, what)


def _any_place(node):
    """A place of the tree under `node` (a recipe's way to its tree)."""
    for c in node.children:
        if isinstance(c, Place):
            return c
        found = _any_place(c) if isinstance(c, SNode) else None
        if found is not None:
            return found
    return None


def _resolve(recipe, fields, snodes):
    """The place a recipe names, in this process (made if it is a hidden field)."""
    kind = recipe[0]
    try:
        if kind == "f":
            return fields[recipe[1]].places[recipe[2]]
        if kind == "m":
            return mask_of(fields[recipe[1]], recipe[2]).places[0]
        if kind == "copy":
            return scratch.per_thread_place(fields[recipe[1]].places[recipe[2]],
                                            int(recipe[3]))
        if kind == "t":
            place = _any_place(snodes[recipe[1]].tree.root)
            if place is None:
                raise _NotLoadable(f"recipe {recipe}: a tree without places")
            return place
        if kind in ("s", "n"):
            node = fields[recipe[1]].places[recipe[2]].snode if kind == "s" else \
                snodes[recipe[1]]
            path, what = recipe[-2:]
            node = node.tree.root
            for k in path:
                node = node.children[int(k)]
            return _state_field(node, what).places[0]
    except (IndexError, AttributeError, TypeError, ValueError) as e:
        raise _NotLoadable(f"recipe {recipe}: {e}") from None
    raise _NotLoadable(f"unknown recipe {recipe}")


def tree_layout(tree):
    """A tree's materialized layout: every place's dtype, offset and address terms, and the
    buffer's size. Cached code was built for exactly this."""
    sig = getattr(tree, "_cache_layout", None)
    if sig is None:
        base = tree.buffer.ctypes.data
        out = [int(tree.buffer.nbytes)]
        stack = [tree.root]

        def place(c):
            out.append([c.dtype.name, c.addr - base,
                        [[t.axis, t.divisor, t.extent, t.stride, t.outermost]
                         for t in c.terms],
                        [[t.axis, t.divisor, t.extent, t.stride, t.outermost]
                         for t in c.bit_terms],
                        repr(cache_key._slot_tokens(c.quant)),
                        None if c.pool is None else  # (under a pooled node: lang/sparse_pool.py)
                        [c.pool.base, c.pool.pool.span, c.pool.cells,
                         [[t.axis, t.divisor, t.extent, t.stride, t.outermost]
                          for t in c.pool.terms]]])

        while stack:
            node = stack.pop()
            for c in node.children:
                if isinstance(c, Place):
                    place(c)
                elif isinstance(c, SNode):
                    stack.append(c)
                else:                                   # a word of bit-packed places
                    for p in c.places:
                        place(p)
        sig = tree._cache_layout = json.dumps(out, separators=(",", ":"))
    return sig


# -- serialization ----------------------------------------------------------------------------
def _loc(loc):
    if loc is None:
        return None
    if type(loc) is not SourceLoc:
        raise _NotLoadable(f"an error location of type {type(loc).__name__}")
    return [getattr(loc, k) for k in SourceLoc.__slots__]


def _unloc(v):
    if v is None:
        return None
    return SourceLoc(*v)


def _serialize(kernel, inst, mode, fields, snodes):
    """The JSON metadata of a compiled instance (raises _NotLoadable if something in it
    cannot be found again in another process)."""
    c = inst.compiled
    art = c.artifact
    meta = c.meta
    recipes = _recipes(fields, snodes)
    trees = []
    tree_index = {}
    for name, tree in art.trees:
        r = recipes.get(id(tree))
        if r is None:
            raise _NotLoadable("the code addresses a field the key does not reach")
        tree_index[id(tree)] = len(trees)
        trees.append([name, r, tree_layout(tree)])
    args = []
    arg_pos = {}
    for pos, entry in enumerate(inst._layout):
        if entry is None:
            args.append(None)
            continue
        slot, spec = entry
        if type(spec) is ArrayArg:
            arg_pos[id(spec)] = pos
            args.append(["a", slot, spec.name, spec.no_grad, spec.clamp, spec.checked,
                         spec.written, spec.reads_grad])
        else:
            args.append(["v", slot])
    private_fields = []
    for f in meta.private_fields:
        k = tree_index.get(id(f.places[0].snode.tree))
        if k is None:
            raise _NotLoadable("a per-thread copy the code does not address")
        private_fields.append(k)
    d = {
        "kernel": kernel.name, "name": meta.name, "entry": meta.entry, "mode": mode.value,
        "errors": [[msg, _loc(loc), nargs] for msg, loc, nargs in meta.errors],
        "ret_types": [t.name for t in meta.ret_types],
        "layout": meta.layout.to_list(),
        "uses_random": bool(meta.uses_random),
        "prints": [[[p if isinstance(p, str) else [p[0], p[1]] for p in pieces],
                    [k.name for k in kinds]] for pieces, kinds in meta.prints],
        "private_arrays": [[arg_pos[id(arg)], bool(grad)] for arg, grad in meta.private_arrays],
        "private_trips": [list(t) for t in meta.private_trips],
        "private_threads": int(meta.private_threads),
        "private_copies": bool(meta.private_copies),
        "private_fields": private_fields,
        "tape_log_capacity": int(meta.tape_log_capacity),
        "args": args,
        "trees": trees,
    }
    try:
        return json.dumps(d, separators=(",", ":")).encode()
    except (TypeError, ValueError) as e:
        raise _NotLoadable(f"metadata: {e}") from None


def _load(kernel, key, specs, mode, entry, fields, snodes):
    header, meta_bytes, obj = entry
    try:
        d = json.loads(meta_bytes)
        if d["mode"] != mode.value or d["kernel"] != kernel.name or len(d["args"]) != len(specs):
            raise _NotLoadable(f"another kernel: {d['kernel']} ({d['mode']}, "
                               f"{len(d['args'])} arguments)")
        # the trees, found and checked before anything else is made
        bindings = {}
        places = []
        for name, recipe, layout in d["trees"]:
            place = _resolve(recipe, fields, snodes)
            field = place.field
            field._materialize()
            tree = place.snode.tree
            if tree_layout(tree) != layout:
                raise _NotLoadable(f"the layout of {field!r}'s tree differs")
            bindings[name] = tree.buffer.ctypes.data
            places.append(place)
        entries = key if mode is Mode.PRIMAL else key[2:]
        layout = []
        arrays = {}
        for pos, (a, (pname, spec)) in enumerate(zip(d["args"], specs)):
            if a is None:
                if spec is not None:
                    raise _NotLoadable("argument kinds differ")
                layout.append(None)
            elif a[0] == "a":
                _, slot, name, no_grad, clamp, checked, written, reads_grad = a
                arg = ArrayArg(name, entries[pos], slot, pack_array)
                arg.no_grad, arg.clamp, arg.checked = no_grad, clamp, checked
                arg._written, arg.reads_grad = written, reads_grad
                arrays[pos] = arg
                layout.append((slot, arg))
            else:
                if spec is None:
                    raise _NotLoadable("argument kinds differ")
                layout.append((a[1], spec))
        m = KernelMeta()
        m.name = d["name"]
        m.entry = d["entry"]
        m.errors = [(msg, _unloc(loc), nargs) for msg, loc, nargs in d["errors"]]
        m.ret_types = tuple(T.by_name(t) for t in d["ret_types"])
        m.layout = CtxLayout.from_list(d["layout"])
        m.uses_random = d["uses_random"]
        m.prints = [(tuple(p if isinstance(p, str) else (p[0], p[1]) for p in pieces),
                     tuple(T.by_name(k) for k in kinds)) for pieces, kinds in d["prints"]]
        m.private_arrays = [(arrays[pos], grad) for pos, grad in d["private_arrays"]]
        m.private_trips = [tuple(t) for t in d["private_trips"]]
        m.private_threads = d["private_threads"]
        m.private_copies = d["private_copies"]
        m.private_fields = [places[k].field for k in d["private_fields"]]
        m.tape_log_capacity = d["tape_log_capacity"]
    except _NotLoadable:
        raise
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise _NotLoadable(f"metadata: {type(e).__name__}: {e}") from None
    try:
        compiled = runtime.get_jit().load(obj, m, bindings)
    except Exception as e:       # an object LLVM does not take
        raise _NotLoadable(f"machine code: {e}") from None
    ret_types = () if mode.reverse else kernel._ret_types
    inst = Instance(kernel, key, compiled, layout, ret_types, kernel._ret_shape)
    inst.tape_log_capacity = m.tape_log_capacity
    inst.build_taint = None
    # the trees its code addresses: destroying one (SNodeTree.destroy) drops the instance
    inst.trees = {p.snode.tree for p in places}
    return inst
