"""`python -m fluxion cache clean [--offline-cache-file-path PATH]`: delete the offline cache's
files (the original system's `ti cache clean`)."""
import argparse
import os
import sys

from fluxion.runtime import offline_cache


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fluxion")
    sub = ap.add_subparsers(dest="command", required=True)
    cache = sub.add_parser("cache", help="manage the offline cache of compiled kernels")
    csub = cache.add_subparsers(dest="action", required=True)
    clean = csub.add_parser("clean", help="delete every cached kernel")
    clean.add_argument("-p", "--offline-cache-file-path", dest="path", default=None,
                       help="the cache directory (default: FLUXION_OFFLINE_CACHE_FILE_PATH, "
                            "else the default directory)")
    args = ap.parse_args(argv)
    path = args.path or os.environ.get("FLUXION_OFFLINE_CACHE_FILE_PATH") or \
        offline_cache.default_path()
    path = os.path.abspath(os.path.expanduser(path))
    n = offline_cache.clean(path)
    print(f"Deleted {n} offline cache files in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
