"""What LLVM says of this machine (its version, the triples, the host CPU's name and features,
the data layout), remembered in a file beside the offline cache.

The offline cache's key covers these (a kernel compiled for another CPU or LLVM must not be
loaded), and the thread pool's IR names the triple and data layout; asking LLVM means loading
it, 64-76 ms, which a process whose kernels are all cached would pay for nothing else. So the
answer is kept in `host-<fingerprint>.json` in the cache directory, the fingerprint being what
can be read without LLVM and changes whenever the answer may: llvmlite's version and the size,
modification time and inode of its LLVM library (a reinstall), the system and machine, and the
processor's identity and feature flags as Linux reports them in /proc/cpuinfo (another CPU, a
virtual machine moved to another host, a kernel that hides AVX-512). Where /proc/cpuinfo is
not there (not Linux), or the file cannot be read or written, LLVM is asked, as before.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import platform
import sys

import llvmlite

from fluxion.runtime.jit import jit_module

KEYS = ("llvm", "process_triple", "triple", "datalayout", "cpu", "features")
_CPUINFO_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags",
                   "Features", "CPU implementer", "CPU architecture", "CPU variant",
                   "CPU part", "CPU revision", "isa")
_described = []


PREFIX, SUFFIX = "host-", ".json"


def description(directory=None, write=None):
    """{key: value} for KEYS, once per process: read from `directory` (the offline cache's)
    when an earlier process wrote it for this fingerprint, else asked of LLVM (and written
    there by `write(directory, name, bytes)`, which replaces a file atomically)."""
    if _described:
        return _described[0]
    fp = fingerprint() if directory else None
    name = f"{PREFIX}{fp}{SUFFIX}" if fp else None
    d = _read(os.path.join(directory, name)) if name else None
    if d is None:
        d = jit_module("mcjit").describe_host()
        if name and write is not None:
            try:
                os.makedirs(directory, exist_ok=True)
                write(directory, name, json.dumps({k: d[k] for k in KEYS}).encode())
            except OSError:
                pass            # (a read-only directory: LLVM is asked by each process)
    _described.append(d)
    return d


def fingerprint():
    """A hash of what the description depends on, read without LLVM; None when the CPU's
    identity cannot be read."""
    cpu = _cpuinfo()
    if cpu is None:
        return None
    libs = []
    for lib in sorted(glob.glob(os.path.join(os.path.dirname(llvmlite.__file__), "binding",
                                             "*llvmlite*"))):
        st = os.stat(lib)
        libs.append((os.path.basename(lib), st.st_size, st.st_mtime_ns, st.st_ino))
    parts = [llvmlite.__version__, libs, sys.platform, platform.machine(), cpu]
    return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()


def _cpuinfo():
    """The first processor's identity and flags in /proc/cpuinfo, or None."""
    try:
        with open("/proc/cpuinfo") as fh:
            text = fh.read()
    except OSError:
        return None
    rows = []
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        if key.strip() in _CPUINFO_FIELDS:
            rows.append((key.strip(), value.strip()))
    return rows or None


def _read(path):
    try:
        with open(path) as fh:
            d = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(d, dict) or any(k not in d for k in KEYS):
        return None
    return d
