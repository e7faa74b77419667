"""The layering of the compiler holds (pyproject.toml's [tool.importlinter] contracts).

A module may import only its own layer and the layers below it, function-local imports
included; the imports that still go up are listed in the contract and the list may only
shrink: an entry that no longer matches an import fails the check too.
"""
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_import_contracts_hold(monkeypatch, capsys):
    cli = pytest.importorskip("importlinter.cli", reason="pip install import-linter (the test extra)")
    monkeypatch.chdir(ROOT)
    # the analysis cache would be written into the clone
    code = cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), cache_dir=None,
                            no_cache=True)
    out = capsys.readouterr().out
    assert code == 0, out


def test_ir_imports_nothing_above_it():
    # stated on its own because it is the foundation: a data type or the builder reaching up
    # into the language would bring the whole user API into every pass
    for path in (ROOT / "src" / "fluxion" / "ir").glob("*.py"):
        text = path.read_text()
        for word in ("fluxion.lang", "fluxion.frontend", "fluxion.passes", "fluxion.codegen",
                     "fluxion.runtime", "fluxion.autodiff"):
            assert word not in text, f"{path.name} mentions {word}"
