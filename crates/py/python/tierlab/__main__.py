"""``python -m tierlab sweep GRID.toml [--out DIR] [--jobs N] [--ray ADDRESS]``: what
``tierlab sweep --ray`` runs."""

import argparse
import sys

from .grid import sweep


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tierlab")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep", help="run a GRID.toml (see `tierlab sweep --help`)")
    s.add_argument("grid")
    s.add_argument("--out", "-o")
    s.add_argument("--jobs", "-j", type=int)
    s.add_argument("--ray", metavar="ADDRESS", help='Ray address, or "local" to start one')
    a = p.parse_args(argv)
    try:
        df = sweep(a.grid, out=a.out, jobs=a.jobs, ray=a.ray)
    except (ValueError, RuntimeError, FileNotFoundError, ImportError) as e:
        print(f"tierlab: {e}", file=sys.stderr)
        return 1
    print(f"{len(df)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
