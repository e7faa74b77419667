"""Example programs. List them with `python -m fluxion.examples`, run one with
`python -m fluxion.examples NAME [options]` (each takes `--help`)."""
