"""The offline cache's files: compiled kernels on disk, shared by processes.

Layout of the cache directory (`ti.init(offline_cache_file_path=...)`, by default
`$XDG_CACHE_HOME/fluxion/kernels`, else `~/.cache/fluxion/kernels`), flat as the original
system's:

* `fx-<key>.tic`, one per kernel instance: a magic number, a JSON header (format, key,
  environment, kernel name, creation time, lengths), the launch metadata (JSON), the machine
  code (an ELF object), and a BLAKE2b checksum of all that. A file that does not check out
  (truncated, corrupted, another format or key) is a miss: the kernel is compiled again and
  the file replaced, never loaded.
* `fluxion.tcb`, the same format: runtime code every process needs (the thread pool), so the
  first kernel of a process does not compile it.
* `host-<fingerprint>.json`: what LLVM says of this machine, which every key covers
  (runtime/host.py), so that a process whose kernels are all here does not load LLVM.

New entries are kept in memory and written when the session ends (`ti.reset`, `ti.init`, the
interpreter's exit), as the original system does; that is also when the size cap is applied.

Several processes may use one directory at once. A file is written under a temporary name
in the directory and renamed over its final name (atomic on POSIX and Windows), so a reader
sees a whole old file or a whole new one, never a partial one; readers take no lock. Only
cleaning (choosing and deleting entries) takes a lock, `flock` on the directory (fcntl, so no
third-party locking package is needed), so that two processes do not both evict. A process
that dies while writing leaves a temporary file that later cleanings remove.

Cleaning (`offline_cache_cleaning_policy`, as the original system's): when the entries take
more than `offline_cache_max_size_of_files` bytes, the fraction `offline_cache_cleaning_factor`
of them is deleted, least recently used first ("lru": a hit refreshes the file's mtime) or
oldest first ("fifo"); "version" deletes only entries made by another version (of fluxion,
Python, LLVM, the CPU...), "never" nothing.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import struct
import sys
import tempfile
import threading
import time

import llvmlite
import numpy as np

from fluxion.runtime import host, program

MAGIC = b"FLUXKC\x00\x01"
FORMAT = 1
SUFFIX = ".tic"
PREFIX = "fx-"
RUNTIME_FILE = "fluxion.tcb"
TMP_PREFIX = ".fx-tmp-"
_DIGEST = 32
POLICIES = ("never", "version", "lru", "fifo")
DEFAULT_MAX_SIZE = 100 * 1024 * 1024
DEFAULT_FACTOR = 0.25
STALE_TMP_SECONDS = 3600
_RELIST_SECONDS = 10.0
_RUNTIME_KEEP = 8


def default_path():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fluxion", "kernels")


class CorruptEntry(Exception):
    pass


def encode(key, env, name, meta, obj):
    """An entry file's bytes."""
    header = json.dumps({"format": FORMAT, "key": key, "env": env, "kernel": name,
                         "created": time.time(), "meta": len(meta), "obj": len(obj)},
                        separators=(",", ":")).encode()
    body = MAGIC + struct.pack("<I", len(header)) + header + meta + obj
    return body + hashlib.blake2b(body, digest_size=_DIGEST).digest()


def decode(data, key=None):
    """(header, meta bytes, object bytes) of an entry file's bytes; CorruptEntry if anything
    is off: magic, format, lengths, checksum, or (given) the key."""
    if len(data) < len(MAGIC) + 4 + _DIGEST or data[:len(MAGIC)] != MAGIC:
        raise CorruptEntry("not a fluxion cache entry")
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.blake2b(body, digest_size=_DIGEST).digest() != digest:
        raise CorruptEntry("checksum mismatch")
    (hl,) = struct.unpack_from("<I", body, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(body[start:start + hl])
        if header["format"] != FORMAT:
            raise CorruptEntry("another format")
        if key is not None and header["key"] != key:
            raise CorruptEntry("another key")
        m, o = int(header["meta"]), int(header["obj"])
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptEntry(f"bad header: {e}") from None
    pos = start + hl
    if pos + m + o != len(body):
        raise CorruptEntry("truncated")
    return header, body[pos:pos + m], body[pos + m:pos + m + o]


def _header_of(path):
    """The header of an entry file (reads only its start), or None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
        if head[:len(MAGIC)] != MAGIC:
            return None
        (hl,) = struct.unpack_from("<I", head, len(MAGIC))
        start = len(MAGIC) + 4
        if start + hl > len(head):
            with open(path, "rb") as fh:
                head = fh.read(start + hl)
        return json.loads(head[start:start + hl])
    except (OSError, ValueError, struct.error):
        return None


def _write_atomic(directory, name, data):
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        # mkstemp makes the file private; an entry is as readable as any file made here
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, os.path.join(directory, name))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask():
    if not _UMASK:
        mask = os.umask(0o22)
        os.umask(mask)
        _UMASK.append(mask)
    return _UMASK[0]


_UMASK = []


class _DirLock:
    """An exclusive lock on the cache directory across processes (flock; a no-op where the
    platform has none: cleaning concurrently then evicts a little more, nothing breaks)."""

    def __init__(self, directory):
        self.directory = directory
        self.fd = None

    def __enter__(self):
        try:
            import fcntl  # (Unix only: elsewhere the directory is not locked)
            self.fd = os.open(self.directory, os.O_RDONLY)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except (ImportError, OSError):
            if self.fd is not None:
                os.close(self.fd)
            self.fd = None
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            import fcntl
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
        return False


class Store:
    """One cache directory as this process uses it."""

    def __init__(self, path, max_size=DEFAULT_MAX_SIZE, policy="lru", factor=DEFAULT_FACTOR):
        self.path = os.path.abspath(os.path.expanduser(path))
        self.max_size = max_size
        self.policy = policy
        self.factor = factor
        self.pending = {}           # key -> entry bytes, written by flush()
        self.runtime_pending = {}   # name -> bytes, for fluxion.tcb
        self._runtime = None        # name -> bytes read from fluxion.tcb
        self.lock = threading.Lock()
        # (directory mtime, bytes of entries, time) at the last listing, and bytes written since
        self._known = None
        self._written_since = 0
        self.stats = {"hits": 0, "misses": 0, "corrupt": 0, "written": 0}

    def entry_path(self, key):
        return os.path.join(self.path, PREFIX + key + SUFFIX)

    # -- kernels --------------------------------------------------------------------------
    def get(self, key):
        """(header, meta, obj) of `key`, from this session's new entries or the disk; None
        when absent. A file that does not check out is removed and counts as absent."""
        data = self.pending.get(key)
        path = self.entry_path(key)
        if data is None:
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                self.stats["misses"] += 1
                return None
            try:
                os.utime(path)       # least recently used: a hit is a use
            except OSError:
                pass
        try:
            entry = decode(data, key)
        except CorruptEntry:
            self.stats["corrupt"] += 1
            self.discard(key)
            return None
        self.stats["hits"] += 1
        return entry

    def put(self, key, data):
        with self.lock:
            self.pending[key] = data

    def discard(self, key):
        """Forget an entry that turned out unusable (its file too)."""
        with self.lock:
            self.pending.pop(key, None)
        try:
            os.unlink(self.entry_path(key))
        except OSError:
            pass

    # -- runtime code ---------------------------------------------------------------------
    def get_runtime(self, name):
        if name in self.runtime_pending:
            return self.runtime_pending[name]
        if self._runtime is None:
            self._runtime = {}
            try:
                with open(os.path.join(self.path, RUNTIME_FILE), "rb") as fh:
                    header, meta, blob = decode(fh.read())
                index = json.loads(meta)
                for k, (off, n) in index.items():
                    self._runtime[k] = blob[off:off + n]
            except (OSError, CorruptEntry, ValueError, TypeError):
                pass
        return self._runtime.get(name)

    def put_runtime(self, name, data):
        with self.lock:
            self.runtime_pending[name] = data

    # -- writing and cleaning -------------------------------------------------------------
    def flush(self, env=""):
        """Write this session's new entries, then clean if the cache is over its size."""
        with self.lock:
            pending, self.pending = self.pending, {}
            runtime, self.runtime_pending = self.runtime_pending, {}
        if not pending and not runtime and not os.path.isdir(self.path):
            return
        try:
            os.makedirs(self.path, exist_ok=True)
            for key, data in pending.items():
                _write_atomic(self.path, PREFIX + key + SUFFIX, data)
                self.stats["written"] += 1
                self._written_since += len(data)
            # the metadata file is there whenever entries are (the original system's
            # layout: one file per kernel and one more): it holds the runtime code
            if runtime or (pending and not os.path.exists(os.path.join(self.path,
                                                                       RUNTIME_FILE))):
                self._write_runtime(runtime, env)
            self.clean(env)
        except OSError:
            pass    # a read-only or full disk: the cache is an optimization

    def _write_runtime(self, new, env):
        with _DirLock(self.path):
            self._runtime = None
            merged = self.get_runtime_all()
            for k in new:
                merged.pop(k, None)
            merged.update(new)
            # (entries of other versions or CPUs that share the directory: the newest few)
            merged = dict(list(merged.items())[-_RUNTIME_KEEP:])
            index, blob, off = {}, bytearray(), 0
            for k, v in merged.items():
                index[k] = (off, len(v))
                blob += v
                off += len(v)
            meta = json.dumps(index).encode()
            _write_atomic(self.path, RUNTIME_FILE, encode("runtime", env, "runtime", meta,
                                                          bytes(blob)))
            self._runtime = merged

    def get_runtime_all(self):
        self.get_runtime("")
        return dict(self._runtime or {})

    def entries(self):
        """[(path, size, mtime)] of the kernel entries on disk."""
        out = []
        try:
            names = os.listdir(self.path)
        except OSError:
            return out
        for n in names:
            if n.startswith(PREFIX) and n.endswith(SUFFIX):
                p = os.path.join(self.path, n)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                out.append((p, st.st_size, st.st_mtime))
        return out

    def clean(self, env=""):
        if self.policy == "never":
            return
        # Most sessions end far below the cap, and the directory is listed (a stat per entry)
        # only when it may be over it: this process's estimate of the size (the last listing
        # plus what it wrote since) is over, the directory changed and the last listing is
        # more than a few seconds old (other processes write too), or never happened. (The
        # test suite ends thousands of sessions on one directory.)
        now = time.monotonic()
        try:
            stamp = os.stat(self.path).st_mtime_ns
        except OSError:
            return
        if self._known is not None:
            known_stamp, total, when = self._known
            if total + self._written_since <= self.max_size and \
                    (known_stamp == stamp or now - when < _RELIST_SECONDS):
                return
        with _DirLock(self.path):
            self._remove_stale_temporaries()
            entries = self.entries()
            total = sum(e[1] for e in entries)
            self._known = (stamp, total, now)
            self._written_since = 0
            if total <= self.max_size:
                return
            self._known = None
            if self.policy == "version":
                victims = [p for p, _, _ in entries
                           if (_header_of(p) or {}).get("env") != env]
            else:
                if self.policy == "fifo":
                    order = sorted(entries, key=lambda e: (_header_of(e[0]) or {}).get(
                        "created", 0.0))
                else:
                    order = sorted(entries, key=lambda e: e[2])
                victims = [p for p, _, _ in order[:int(self.factor * len(order))]]
            for p in victims:
                try:
                    os.unlink(p)
                except OSError:
                    pass
            if len(victims) == len(entries):
                # an empty cache is an empty directory, as the original system's
                try:
                    os.unlink(os.path.join(self.path, RUNTIME_FILE))
                except OSError:
                    pass
                self._runtime = None

    def _remove_stale_temporaries(self):
        now = time.time()
        try:
            names = os.listdir(self.path)
        except OSError:
            return
        for n in names:
            if n.startswith(TMP_PREFIX):
                p = os.path.join(self.path, n)
                try:
                    if now - os.stat(p).st_mtime > STALE_TMP_SECONDS:
                        os.unlink(p)
                except OSError:
                    pass


def clean(path=None):
    """Delete every fluxion cache file in `path` (by default the current session's cache
    directory, else the default one); returns how many were deleted. The Python side of the
    original system's `ti cache clean`."""
    if path is None:
        store = _stores.get("current")
        path = store.path if store is not None else configured_path()
    path = os.path.abspath(os.path.expanduser(path))
    count = 0
    try:
        names = os.listdir(path)
    except OSError:
        return 0
    with _DirLock(path):
        for n in names:
            if (n.startswith(PREFIX) and n.endswith(SUFFIX)) or n == RUNTIME_FILE or \
                    n.startswith(TMP_PREFIX) or (n.startswith(host.PREFIX)
                                                 and n.endswith(host.SUFFIX)):
                try:
                    os.unlink(os.path.join(path, n))
                    count += 1
                except OSError:
                    pass
    store = _stores.get("current")
    if store is not None and store.path == path:
        with store.lock:
            store.pending.clear()
            store.runtime_pending.clear()
            store._runtime = None
    return count


def configured_path():
    cfg = program.config()
    return getattr(cfg, "offline_cache_file_path", None) or default_path()


_stores = {}


def store_for(cfg):
    """The Store of the session's configuration, or None when the cache is off."""
    s = _stores.get("current")
    if not getattr(cfg, "offline_cache", False):
        if s is not None:
            s.flush(_env_or_empty())
            _stores.pop("current", None)
        return None
    path = os.path.abspath(os.path.expanduser(cfg.offline_cache_file_path or default_path()))
    if s is None or s.path != path:
        if s is not None:
            s.flush(_env_or_empty())
        s = _stores["current"] = Store(path)
    s.max_size = cfg.offline_cache_max_size_of_files
    s.policy = cfg.offline_cache_cleaning_policy
    s.factor = cfg.offline_cache_cleaning_factor
    return s


def _env_or_empty():
    return _env[0] if _env else ""


def enabled(cfg):
    """Whether kernels of this configuration go through the offline cache: the CPU, and no
    request to print IR (a hit compiles nothing, so would print nothing)."""
    return (cfg.offline_cache and not program.on_cuda() and not cfg.print_ir
            and not os.environ.get("FLUXION_PRINT_IR"))


KEY_FORMAT = 1               # bumped when what a kernel's key covers changes (lang/cache_key.py)


# -- the environment ---------------------------------------------------------------------------
_env = []


def environment():
    """A hash of what every cached kernel of this process depends on besides its own inputs:
    the cache format, fluxion's source, Python, numpy, llvmlite and LLVM, the target and the
    CPU's name and features. Computed once per process."""
    if _env:
        return _env[0]
    h = hashlib.blake2b(digest_size=20)
    d = host_description()
    parts = [KEY_FORMAT, sys.implementation.name, sys.version, np.__version__,
             llvmlite.__version__, repr(tuple(d["llvm"])), d["process_triple"], d["cpu"],
             d["features"], source_hash()]
    h.update(repr(parts).encode())
    _env.append(h.hexdigest())
    return _env[0]


def host_description():
    """LLVM's description of the host (runtime/host.py), remembered in the current cache
    directory when there is one."""
    s = _stores.get("current")
    return host.description(s.path if s is not None else None, _write_atomic)


def source_hash(root=None):
    """A hash of the state of fluxion's Python files: for each, its path, size, modification
    and change times and inode, which any edit, copy or reinstall changes (Python's own
    bytecode cache trusts less: the modification time in seconds and the size). Reading and
    hashing the contents (1.8 MB) took 6 ms of every process's first kernel; these take one
    stat per file. A file touched with its contents unchanged changes the hash too: the
    kernels are then compiled again, which is only slower. (Two writes of one size within
    one tick of the file system's clock, a few milliseconds, look alike; so do the contents
    on disk and the code a process imported before they were edited, as with the contents'
    hash.) `root`: fluxion's package directory by default."""
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rows = []
    _stat_tree(root, "", rows)
    return hashlib.blake2b(repr(rows).encode(), digest_size=20).hexdigest()


def _stat_tree(directory, rel, rows):
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return          # (not a directory: a zipped package) nothing to stat, as os.walk
    for e in entries:
        if e.name.endswith(".py") and e.is_file():
            st = e.stat()
            rows.append((rel + e.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
        elif e.name != "__pycache__" and e.is_dir(follow_symlinks=False):
            _stat_tree(e.path, rel + e.name + "/", rows)


def end_session():
    """`ti.reset`/`ti.init`: write the session's entries and clean."""
    s = _stores.get("current")
    if s is not None:
        s.flush(_env_or_empty())


@atexit.register
def _flush_at_exit():
    s = _stores.get("current")
    if s is not None:
        try:
            s.flush(_env_or_empty())
        except Exception:
            pass
