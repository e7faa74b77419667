"""What LLVM says of the host, remembered beside the offline cache (runtime/host.py): read
back without LLVM by a later process with the same fingerprint, asked again when the
fingerprint changes or the file is damaged, and equal to what LLVM says."""
import json
import os

import pytest

from fluxion.runtime import host, mcjit, offline_cache

pytestmark = pytest.mark.cpu_only


def _write(directory, name, data):
    with open(os.path.join(directory, name), "wb") as fh:
        fh.write(data)


@pytest.fixture
def fresh(monkeypatch):
    """A process's first description: the memo emptied, LLVM's answers counted."""
    asked = []

    def describe():
        asked.append(1)
        return mcjit.describe_host()

    class Mod:
        describe_host = staticmethod(describe)

    monkeypatch.setattr(host, "jit_module", lambda name: Mod)

    def again():
        monkeypatch.setattr(host, "_described", [])
    again()
    return asked, again


def _files(d):
    return sorted(n for n in os.listdir(d) if n.startswith(host.PREFIX))


def test_written_once_then_read_without_llvm(tmp_path, fresh):
    asked, again = fresh
    first = host.description(str(tmp_path), _write)
    assert asked == [1] and len(_files(tmp_path)) == 1
    assert first == mcjit.describe_host()
    assert set(first) == set(host.KEYS)
    again()
    second = host.description(str(tmp_path), _write)
    assert asked == [1]                                   # read from the file
    assert second == json.loads(json.dumps(first))


def test_another_cpu_or_llvm_asks_again(tmp_path, fresh, monkeypatch):
    asked, again = fresh
    host.description(str(tmp_path), _write)
    rows = host._cpuinfo()
    again()
    # the same machine with one feature flag hidden (a VM moved to another host, say)
    monkeypatch.setattr(host, "_cpuinfo", lambda: [(k, v.replace("sse2", "")) for k, v in rows])
    host.description(str(tmp_path), _write)
    assert asked == [1, 1] and len(_files(tmp_path)) == 2
    again()
    monkeypatch.setattr(host.llvmlite, "__version__", "0.0.1-another")
    host.description(str(tmp_path), _write)
    assert asked == [1, 1, 1] and len(_files(tmp_path)) == 3


@pytest.mark.parametrize("damage", [b"", b"{", b"[1, 2]", b'{"llvm": [15, 0, 7]}'])
def test_a_damaged_file_is_asked_again_and_replaced(tmp_path, fresh, damage):
    asked, again = fresh
    want = host.description(str(tmp_path), _write)
    name, = _files(tmp_path)
    (tmp_path / name).write_bytes(damage)
    again()
    assert host.description(str(tmp_path), _write) == want
    assert asked == [1, 1]
    assert json.loads((tmp_path / name).read_text()) == json.loads(json.dumps(want))


def test_without_cpuinfo_llvm_is_asked_and_nothing_written(tmp_path, fresh, monkeypatch):
    asked, again = fresh
    monkeypatch.setattr(host, "_cpuinfo", lambda: None)
    host.description(str(tmp_path), _write)
    again()
    host.description(str(tmp_path), _write)
    assert asked == [1, 1] and _files(tmp_path) == []


def test_clearing_the_cache_removes_it(tmp_path, fresh):
    host.description(str(tmp_path), _write)
    (tmp_path / "unrelated.txt").write_text("kept")
    assert offline_cache.clean(str(tmp_path)) == 1
    assert os.listdir(tmp_path) == ["unrelated.txt"]
