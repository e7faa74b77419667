"""`python -m fluxion.examples [NAME [options]]`: list the examples, or run one."""
import importlib
import pkgutil
import sys

import fluxion.examples as pkg


def names():
    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


def summary(name):
    mod = importlib.import_module(f"fluxion.examples.{name}")
    return (mod.__doc__ or "").strip().splitlines()[0]


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help", "list"):
        print("fluxion examples (python -m fluxion.examples NAME [options]):")
        for n in names():
            print(f"  {n:20s} {summary(n)}")
        return
    name = sys.argv[1]
    if name not in names():
        sys.exit(f"no example named {name!r}; choose from: {', '.join(names())}")
    mod = importlib.import_module(f"fluxion.examples.{name}")
    sys.argv = [f"fluxion.examples.{name}"] + sys.argv[2:]
    mod.main()


if __name__ == "__main__":
    main()
