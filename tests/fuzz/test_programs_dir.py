"""Random programs are written to files (kernels read their source); a run of the test suite
must not leave them behind. Each process made a directory of its own and kept it, and the
checking servers of check.py, killed when done, could not remove theirs: a day's runs of the
suite and the fuzzer had left 70 `fluxion-fuzz-*` directories in the temporary directory."""
import glob
import os
import subprocess
import sys
import tempfile
import time

import pytest

from . import check as C
from . import gen
from . import oracles as O

pytestmark = pytest.mark.cpu_only

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_killed_checking_server_writes_into_this_process_directory():
    mine = O.programs_dir()
    start = time.time() - 1
    server = C.Server("self", "kernel")
    try:
        assert server(gen.program(3, gen.Options(taichi=False))) == {}
        pid = server.p.pid
    finally:
        server.close()                      # kills it: it cleans up nothing itself
    # (other processes, this run's other workers among them, make directories of their own
    # meanwhile: the server's files say where it wrote)
    # (files of an earlier process with the same pid, left by a run that was killed, are
    # older than this test: a CI run failed on a morning's leftovers)
    written = [p for p in glob.glob(os.path.join(tempfile.gettempdir(), "fluxion-fuzz-*",
                                                 f"fuzzprog_{pid}_*.py"))
               if os.path.getmtime(p) >= start]
    assert written and {os.path.dirname(p) for p in written} == {mine}


def test_the_process_that_made_the_directory_removes_it_at_exit():
    r = subprocess.run([sys.executable, "-c", "from tests.fuzz import oracles as O\n"
                        "O.load('x = 1')\nprint(O.programs_dir())"],
                       cwd=ROOT, env={k: v for k, v in os.environ.items()
                                      if k != "FLUXION_FUZZ_DIR"},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    made = r.stdout.strip()
    assert os.path.basename(made).startswith("fluxion-fuzz-") and not os.path.exists(made)
