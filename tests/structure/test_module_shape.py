"""Ratchets on the shape of the source: modules stay short and import at their top.

Issue 14 asks for no module over about 600 lines without a reason written at its top, and no
function-local import but of optional dependencies: one of fluxion's own modules hides an
import cycle, which the layering should remove instead; one of the standard library or NumPy
only moves a cost into every call. The modules that do not meet this yet are listed below with what they
have today: a module may shrink below its figure, never grow past it, and a module not listed
meets the rule. Lower a figure (or drop the entry) when a change pays part of the debt.
"""
import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "fluxion"
LONG = 600
# a module this long on purpose says why in its first lines, after this marker
REASON = "Why this module is long:"

# path under src/fluxion -> lines today (the debt: split them)
LONG_MODULES = {
}

# path under src/fluxion -> function-local imports of fluxion modules today
LOCAL_IMPORTS = {
}


# what a function may import: optional dependencies (loaded only by the users who need them),
# and the few imports that are lazy on purpose, each with its reason at the import
OPTIONAL = {"torch", "PIL", "scipy", "imageio", "imageio_ffmpeg", "matplotlib", "ray",
            "tkinter", "nvidia"}
LAZY = {
    ("_llvm.py", "llvmlite"),                   # LLVM's library loads with the first kernel
    ("runtime/compile_worker.py", "llvmlite"),  # the parent imports this module too
    ("runtime/offline_cache.py", "fcntl"),      # Unix only
    ("runtime/cuda_driver.py", "ctypes"),       # ctypes.util, only to find libcuda
    ("runtime/libcalls.py", "ctypes"),          # ctypes.util, only to find libgcc off Linux
}


def _modules():
    for p in sorted(SRC.rglob("*.py")):
        yield str(p.relative_to(SRC)), p.read_text()


def _local_imports(text):
    tree = ast.parse(text)
    found = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                if isinstance(n, ast.ImportFrom):
                    mod = n.module or ""
                    if n.level or mod == "fluxion" or mod.startswith("fluxion."):
                        found.add(id(n))
                elif isinstance(n, ast.Import):
                    if any(a.name == "fluxion" or a.name.startswith("fluxion.") for a in n.names):
                        found.add(id(n))
    return len(found)


def test_no_module_grows_past_its_length():
    too_long = []
    for rel, text in _modules():
        n = text.count("\n")
        limit = LONG_MODULES.get(rel, LONG)
        if n > limit and REASON not in "\n".join(text.splitlines()[:40]):
            too_long.append(f"{rel}: {n} lines (limit {limit})")
    assert not too_long, "split these modules, or say why at their top:\n" + "\n".join(too_long)


def test_no_new_function_local_imports():
    grown = []
    for rel, text in _modules():
        n = _local_imports(text)
        if n > LOCAL_IMPORTS.get(rel, 0):
            grown.append(f"{rel}: {n} function-local imports of fluxion (allowed "
                         f"{LOCAL_IMPORTS.get(rel, 0)})")
    assert not grown, "import at the top of the module (the layering says where):\n" + \
        "\n".join(grown)


def test_the_debt_lists_name_real_modules():
    # a renamed or deleted module leaves a stale entry behind: drop it
    names = {rel for rel, _ in _modules()}
    stale = sorted((set(LONG_MODULES) | set(LOCAL_IMPORTS) | {rel for rel, _ in LAZY}) - names)
    assert not stale, stale


def _imported_in_functions(text):
    """The top-level package of every import inside a function of `text`."""
    tree = ast.parse(text)
    names = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # (only the function's own statements: a nested function is walked on its own)
            for n in ast.walk(fn):
                if isinstance(n, ast.Import):
                    names += [a.name.split(".")[0] for a in n.names]
                elif isinstance(n, ast.ImportFrom):
                    names.append("." if n.level else (n.module or "").split(".")[0])
    return set(names)


def test_functions_import_only_optional_dependencies():
    found = []
    for rel, text in _modules():
        for name in sorted(_imported_in_functions(text)):
            if name not in OPTIONAL and (rel, name) not in LAZY:
                found.append(f"{rel}: imports {name} in a function")
    assert not found, "import at the top of the module:\n" + "\n".join(found)


def test_the_rule_sees_a_local_import():
    text = "import os\n\ndef f():\n    import numpy as np\n    import torch\n    return np\n"
    assert _imported_in_functions(text) == {"numpy", "torch"}
