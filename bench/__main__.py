"""`make bench`: run every bench/bench_*.py's main(), each printing its own table of measured figures.

`python -m bench executor train` runs only the named benches.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    names = sorted(p.stem[len("bench_"):] for p in Path(__file__).parent.glob("bench_*.py"))
    chosen = [n for n in names if not argv or n in argv]
    unknown = set(argv) - set(names)
    if unknown:
        print(f"error: no bench named {', '.join(sorted(unknown))}; benches are {', '.join(names)}", file=sys.stderr)
        return 2
    for name in chosen:
        print(f"\n=== bench {name} ===", flush=True)
        start = time.perf_counter()
        importlib.import_module(f"bench.bench_{name}").main()
        print(f"(bench {name}: {time.perf_counter() - start:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
