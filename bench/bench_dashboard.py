"""Dashboard server under load on loopback: requests/s and p50/p99 latency for N concurrent
clients polling the page's JSON views, and the server's RSS before and after.

The server runs in its own process (so its RSS is its own) over a sample ladder root (real
published loss curves, see bench.sample); the "long hero" case appends rows until the
hero's metrics.jsonl holds 100k rows, as a long run would. Clients are threads with keep-alive
connections, each cycling through overview, rungs, fit, hero and moe (what open tabs poll).
Note: clients and server share this machine's cores, so the figures are a floor.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

VIEWS = ("overview", "rungs", "fit", "hero", "moe")
DURATION_S = float(os.environ.get("BENCH_DASHBOARD_SECONDS", "3"))
CLIENTS = (1, 8, 32)

SERVER = """
import sys
from ladder.dashboard.server import DashboardServer
s = DashboardServer(sys.argv[1], port=0, cache_s=float(sys.argv[2]))
print(s.port, flush=True)
s.serve_forever()
"""


def _rss_mb(pid: int) -> float:
    import psutil

    return psutil.Process(pid).memory_info().rss / 2**20


def _grow_hero(root: Path, rows: int) -> int:
    from ladder.outputs import layout

    metrics = next(root.glob("demo/hero-*")) / layout.METRICS
    base = [r for r in layout.iter_jsonl(metrics)]
    with metrics.open("a") as fh:
        fh.write("\n")
        last = base[-1]
        for i in range(rows - len(base)):
            fh.write(json.dumps({**last, "step": last["step"] + i + 1, "loss": last["loss"] - 1e-6 * i}) + "\n")
    return rows


def _load(port: int, clients: int, seconds: float, ladder: str = "demo") -> dict:
    lat: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    stop = time.perf_counter() + seconds

    def worker(i: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        k = i
        while time.perf_counter() < stop:
            path = f"/api/ladders/{ladder}/{VIEWS[k % len(VIEWS)]}"
            k += 1
            t = time.perf_counter()
            try:
                conn.request("GET", path, headers={"Accept-Encoding": "gzip"})
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    errors[i] += 1
            except (OSError, http.client.HTTPException):
                errors[i] += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            lat[i].append(time.perf_counter() - t)
        conn.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    all_lat = sorted(x for li in lat for x in li)
    n = len(all_lat)
    return {"requests": n, "rps": n / wall, "p50_ms": 1e3 * all_lat[n // 2] if n else float("nan"),
            "p99_ms": 1e3 * all_lat[min(n - 1, int(n * 0.99))] if n else float("nan"), "errors": sum(errors)}


def _first(port: int) -> float:
    """Wall time of the first round of views: the server parses every file once."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t = time.perf_counter()
    for v in VIEWS:
        conn.request("GET", f"/api/ladders/demo/{v}")
        conn.getresponse().read()
    conn.close()
    return 1e3 * (time.perf_counter() - t)


def _rebuild(root: Path) -> dict[str, tuple[float, int]]:
    """Per view: median ms to rebuild it and encode it as JSON after a change (files already
    parsed, as in a server whose run appended rows), and the answer's size."""
    from ladder.dashboard.data import Root

    r = Root(root)
    out = {}
    for v in VIEWS:
        getattr(r, v)("demo")
        times, size = [], 0
        for _ in range(5):
            t = time.perf_counter()
            size = len(json.dumps(getattr(r, v)("demo"), separators=(",", ":"), default=str))
            times.append(time.perf_counter() - t)
        out[v] = (1e3 * statistics.median(times), size)
    return out


def _serve(root: Path, cache_s: float):
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(root), str(cache_s)], stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    return proc, port


def main() -> None:
    from bench.sample import write_sample_root

    rows_out = []
    cold_out = []
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        root = Path(tmp)
        write_sample_root(root, "demo", half_written=True)
        for case, hero_rows in (("sample (hero 320 rows)", None), ("long hero (100k rows)", 100_000)):
            if hero_rows:
                _grow_hero(root, hero_rows)
            cold_out.append((case, _rebuild(root)))
            proc, port = _serve(root, cache_s=1.0)
            try:
                rss0 = _rss_mb(proc.pid)
                first = _first(port)
                for n in CLIENTS:
                    r = _load(port, n, DURATION_S)
                    rows_out.append((case, n, r, rss0, _rss_mb(proc.pid), first))
            finally:
                proc.terminate()
                proc.wait(timeout=10)

    print(f"dashboard under load: {DURATION_S:.0f} s per row, keep-alive clients cycling {', '.join(VIEWS)} "
          "(answers rebuilt only when a file changed)")
    print(f"{'case':<24}{'clients':>8}{'requests':>10}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}"
          f"{'first load ms':>15}{'RSS MB start':>14}{'after':>8}")
    for case, n, r, rss0, rss1, first in rows_out:
        print(f"{case:<24}{n:>8}{r['requests']:>10}{r['rps']:>9.0f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}"
              f"{r['errors']:>8}{first:>15.0f}{rss0:>14.1f}{rss1:>8.1f}")
    print("\nview rebuild after a change (files already parsed): median ms / JSON KB")
    print(f"{'case':<24}" + "".join(f"{v:>16}" for v in VIEWS))
    for case, cold in cold_out:
        print(f"{case:<24}" + "".join(f"{ms:>9.1f}/{kb / 1024:>4.0f}KB" for ms, kb in cold.values()))


if __name__ == "__main__":
    main()
