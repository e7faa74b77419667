"""Mutation check of the offline cache's key (a developer's tool, not a test): each entry
removes one thing the key or the loader relies on, runs tests/runtime/test_offline_cache.py,
and must see it fail (CAUGHT). A MISSED line means no test notices that component missing.

    python tests/runtime/mutate_offline_cache.py [NAME ...]

The snippets are the code as it stands: when the code changes, update them (a snippet not
found stops the run). Two components are keyed twice on purpose and are MISSED alone: a
template argument's value (also keyed where the body names the parameter) and a field's
identity (also the identity of its tree); their combined entries must be CAUGHT.
Last run (2026-11-24): every other entry and both combinations CAUGHT."""
import os
import subprocess
import sys

WT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MUT = [  # (name, file, old, new) or (name, [(file, old, new), ...])
 ("source text", "src/fluxion/lang/cache_key.py", "self.put(src.file, src.first_line, src.text)", "self.put(src.file, src.first_line)"),
 ("chain values", "src/fluxion/lang/cache_key.py", "                try:\n                    self.value(v)\n                except Uncacheable as e:", "                try:\n                    pass\n                except Uncacheable as e:"),
 ("pyfunc closure", "src/fluxion/lang/cache_key.py", "                    self.value(cell.cell_contents)", "                    pass"),
 ("pyfunc code", "src/fluxion/lang/cache_key.py", "        self.code(f.__code__, f.__globals__)\n", "\n"),
 ("template args", "src/fluxion/lang/kernel_cache.py", "            fp.put(\"template\")\n            fp.value(a)", "            fp.put(\"template\")"),
 ("config", "src/fluxion/lang/kernel_cache.py", "    cache_key.config_tokens(fp, runtime.config())\n", "\n"),
 ("environment", "src/fluxion/lang/kernel_cache.py", "fp.put(\"fluxion-kernel\", cache_key.FORMAT, cache_key.environment(), mode)", "fp.put(\"fluxion-kernel\", cache_key.FORMAT, mode)"),
 ("mode", "src/fluxion/lang/kernel_cache.py", "fp.put(\"fluxion-kernel\", cache_key.FORMAT, cache_key.environment(), mode)", "fp.put(\"fluxion-kernel\", cache_key.FORMAT, cache_key.environment())"),
 ("tree structure", "src/fluxion/lang/cache_key.py", "        self.put(\"sn\", type(node).__name__, repr(node.axes), repr(node.extents),\n                 len(node.children))", "        return"),
 ("tree identity", "src/fluxion/lang/cache_key.py", "        idx = self.trees.get(id(tree))\n        if idx is None:\n            idx = self.trees[id(tree)] = len(self.trees)", "        idx = None\n        if idx is None:\n            idx = self.trees[id(tree)] = 0"),
 ("field attrs", "src/fluxion/lang/cache_key.py", "        self.put(type(f).__name__, f.dtype.name, f.name, f.n, f.m,\n                 getattr(f, \"ndim\", None), repr(f.offset), f.is_grad)", "        pass"),
 ("place positions", "src/fluxion/lang/cache_key.py", "                self.put(\"place\", *_place_position(p))", "                pass"),
 ("quant slots", [("src/fluxion/lang/cache_key.py", "    if slot is None:\n        return ()", "    if True:\n        return ()")]),
 ("hints", "src/fluxion/lang/cache_key.py", "            self.put(k)\n            self.value(ann)", "            self.put(k)"),
 ("array content", "src/fluxion/lang/cache_key.py", "            self.put(a.dtype.str, repr(a.shape),\n                     hashlib.blake2b(data, digest_size=16).hexdigest())", "            self.put(a.dtype.str, repr(a.shape))"),
 ("ndarray desc", "src/fluxion/lang/kernel_cache.py", "            fp.put(\"ndarray\", d.dtype.name, d.ndim, repr(d.elem_shape), d.contiguous,\n                   d.device, d.writable)", "            fp.put(\"ndarray\")"),
 ("layout check", "src/fluxion/lang/kernel_cache.py", "            if tree_layout(tree) != layout:", "            if False:"),
 ("build taint", "src/fluxion/lang/kernel_cache.py", "    if inst.build_taint:\n        return inst.build_taint", "    pass"),
 ("checksum", "src/fluxion/runtime/offline_cache.py", "    if hashlib.blake2b(body, digest_size=_DIGEST).digest() != digest:", "    if False:"),
 ("template args+chains", [("src/fluxion/lang/cache_key.py", "            if root in params:\n                if root not in bound:", "            if root in params:\n                if True:"), ("src/fluxion/lang/kernel_cache.py", "            fp.put(\"template\")\n            fp.value(a)", "            fp.put(\"template\")")]),
 ("memo+tree identity", [("src/fluxion/lang/cache_key.py", "        if self._seen(f, \"field\"):\n            return", "        self.put(\"field\")"), ("src/fluxion/lang/cache_key.py", "        idx = self.trees.get(id(tree))\n        if idx is None:\n            idx = self.trees[id(tree)] = len(self.trees)", "        idx = None\n        if idx is None:\n            idx = self.trees[id(tree)] = 0")]),
 ("field memo", "src/fluxion/lang/cache_key.py", "        if self._seen(f, \"field\"):\n            return", "        self.put(\"field\")"),
]
only = sys.argv[1:] 
for m in MUT:
    name = m[0]
    edits = m[1] if len(m) == 2 else [m[1:]]
    if only and name not in only: continue
    saved = {}
    for path, old, new in edits:
        p = os.path.join(WT, path)
        saved.setdefault(p, open(p).read())
        src = open(p).read()
        assert src.count(old) == 1, (name, src.count(old))
        open(p, "w").write(src.replace(old, new))
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:cacheprovider",
                            "tests/runtime/test_offline_cache.py"],
                           cwd=WT, env=dict(os.environ, PYTHONPATH=WT + "/src"),
                           capture_output=True, text=True, timeout=900)
        last = r.stdout.strip().splitlines()[-1]
        failed = [l for l in r.stdout.splitlines() if l.startswith("FAILED")]
        print(f"{name:16} rc={r.returncode} {'CAUGHT' if r.returncode else 'MISSED'} {failed[:1]}", flush=True)
    finally:
        for p, src in saved.items():
            open(p, "w").write(src)
