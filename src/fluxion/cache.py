"""The offline cache of compiled kernels (`ti.init(offline_cache=True)`, the default).

    ti.cache.clean()            # delete the cached kernels (of the session's directory)
    ti.cache.clean(path)        # ... of another directory
    ti.cache.path()             # the directory the session uses
    ti.cache.info()             # {"path", "entries", "bytes"}

From a shell: `python -m fluxion cache clean [--offline-cache-file-path PATH]`, as the original
system's `ti cache clean`. How the cache works: fluxion/runtime/offline_cache.py.
"""
from __future__ import annotations

import os
from fluxion.runtime import offline_cache as _oc


def path():
    """The cache directory of the current configuration."""
    return os.path.abspath(os.path.expanduser(_oc.configured_path()))


def clean(path=None):
    """Delete every cached kernel in `path` (default: the session's cache directory); returns
    the number of files deleted. Kernels already loaded keep running."""
    return _oc.clean(path)


clear = clean


def info(path=None):
    """{"path", "entries", "bytes"} of a cache directory (default: the session's)."""
    p = os.path.abspath(os.path.expanduser(path or _oc.configured_path()))
    entries = _oc.Store(p).entries()
    return {"path": p, "entries": len(entries), "bytes": sum(e[1] for e in entries)}
