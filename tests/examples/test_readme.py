"""Each Python block of the README's tour runs as written, on its own, in a fresh process."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src")
with open(os.path.join(ROOT, "README.md")) as _f:
    BLOCKS = re.findall(r"```python\n(.*?)```", _f.read(), re.S)

pytestmark = pytest.mark.cpu_only


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_readme_block_runs_as_written(k, tmp_path):
    if "import torch" in BLOCKS[k]:
        pytest.importorskip("torch")
    path = tmp_path / f"block{k}.py"
    path.write_text(BLOCKS[k])
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-2000:]


def test_the_readme_has_a_tour():
    assert len(BLOCKS) >= 3
