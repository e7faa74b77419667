"""The memory behind the scratch buffers that passes request (ir/scratch.py).

Made when a program is loaded, before its code is generated (compiler/driver.py) or found
in the offline cache (lang/kernel_cache.py). Each buffer is a hidden field in an SNode tree
of its own, so the code addresses it as it addresses any field (a symbol of its tree plus a
constant offset) and a cached program binds it as it binds any tree. Buffers are kept per
process state (`ti.reset` drops them with the fields) and shared by the programs that make
the same request: the copies of one field component serve every kernel that privatizes it
(they are at zero between launches, and such launches take turns, runtime/cpu_jit.py).
"""
from __future__ import annotations

from fluxion.ir import stmts as S
from fluxion.ir.scratch import ScratchBuffer, hooks, per_thread_copies
from fluxion.runtime import program


def allocate(ir):
    """Give every scratch request of `ir` its memory: its pointers address the buffer's
    hidden field from then on, and `ir.private_fields` lists those fields (a failed launch
    zeroes them: it stopped before its merge)."""
    requests = getattr(ir, "scratch", None)
    if not requests:
        return
    places = {id(r): place_of(r) for r in requests}
    for body in S.bodies(ir):
        for st in S.walk(body):
            if isinstance(st, S.GlobalPtrStmt) and type(st.place) is ScratchBuffer:
                st.place = places[id(st.place)]
    fields = []
    for p in places.values():
        if p.field not in fields:
            fields.append(p.field)
    ir.private_fields = fields


def buffers():
    """{key: (request's copy_of, place)} of the buffers this process state made."""
    return program.state().__dict__.setdefault("scratch_buffers", {})


def place_of(request):
    """The place of the hidden field holding `request`'s memory (made, zeroed, on first
    use in this process state)."""
    cache = buffers()
    key = (id(request.copy_of), request.shape, request.dtype)
    hit = cache.get(key)
    if hit is None or hit[0] is not request.copy_of:
        name = f"{request.copy_of!r}:per-thread" if request.copy_of is not None else "scratch"
        hidden = hooks.hidden_field(request.dtype, request.shape, name, request.offset,
                                    copies_of=request.copy_of)
        hit = cache[key] = (request.copy_of, hidden.places[0])
    return hit[1]


def per_thread_place(place, nthreads):
    """The place of `nthreads` per-thread copies of `place` (the offline cache's recipe)."""
    return place_of(per_thread_copies(place, nthreads))
