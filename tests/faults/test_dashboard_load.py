"""`ladder dashboard` under load: 50 concurrent keep-alive clients for 15 s on loopback against the real
CLI serving a sample ladder root (its hero 60% trained, its last metrics line half-written). No request fails, and the
server's resident memory grows, between the end of a warm-up and the end of the run, by less than a bound per request
served (so a leak of so many bytes a request fails however many requests the machine serves in the time)."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import threading
import time

import pytest
from conftest import LADDER, REPO, cli_env

pytestmark = pytest.mark.slow

CLIENTS, SECONDS = 50, 15.0
# The bound was 16 MiB over a 30 s run, which served 31 693 requests on a loaded 2-core machine (RSS grew 0.1 MiB):
# about 530 bytes a request, now the bound per request, so the run can be shorter and still fail on the same leak.
# The floor is far above the growth measured (a 15 s run on a slow machine serves few requests).
RSS_BYTES_PER_REQUEST, RSS_FLOOR_MIB = 530, 4.0


def _rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def test_dashboard_serves_50_clients_for_15s_without_errors_or_growth(tmp_path):
    from bench.sample import write_sample_root

    root = tmp_path / "root"
    write_sample_root(root, "demo")
    proc = subprocess.Popen([LADDER, "dashboard", "--root", str(root), "--port", "0"], cwd=REPO, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, line + proc.stderr.read() if proc.poll() is not None else line
        port = int(m.group(1))
        paths = ["/", "/api/ladders", "/api/ladders/demo/overview", "/api/ladders/demo/rungs",
                 "/api/ladders/demo/fit", "/api/ladders/demo/hero", "/api/ladders/demo/tables"]
        errors: list[str] = []
        counts = [0] * CLIENTS
        stop = threading.Event()

        def client(i: int, until: float) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            etags: dict[str, str] = {}
            k = i
            while not stop.is_set() and time.time() < until:
                path = paths[k % len(paths)]
                k += 1
                try:
                    headers = {"If-None-Match": etags[path]} if path in etags and k % 2 else {}
                    conn.request("GET", path, headers=headers)
                    r = conn.getresponse()
                    body = r.read()
                    if r.status not in (200, 304):
                        errors.append(f"{path}: HTTP {r.status}")
                    elif r.status == 200 and path.startswith("/api"):
                        json.loads(body)
                        if r.getheader("ETag"):
                            etags[path] = r.getheader("ETag")
                    counts[i] += 1
                except Exception as e:  # noqa: BLE001 - every failure is a finding
                    errors.append(f"{path}: {type(e).__name__}: {e}")
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.close()

        def run(seconds: float) -> None:
            until = time.time() + seconds
            threads = [threading.Thread(target=client, args=(i, until)) for i in range(CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(seconds + 60)

        run(3.0)  # warm-up: caches filled, threads' first allocations done
        rss0 = _rss_mib(proc.pid)
        counts[:] = [0] * CLIENTS
        run(SECONDS)
        rss1 = _rss_mib(proc.pid)
        total = sum(counts)
        print(f"dashboard load: {CLIENTS} clients x {SECONDS:.0f}s: {total} requests "
              f"({total / SECONDS:.0f}/s), RSS {rss0:.1f} -> {rss1:.1f} MiB", file=sys.stderr)
        assert not errors, errors[:5]
        assert min(counts) > 0, "a client never got an answer"
        bound_mib = max(RSS_FLOOR_MIB, RSS_BYTES_PER_REQUEST * total / 2**20)
        assert rss1 - rss0 < bound_mib, (rss0, rss1, total, bound_mib)
        assert proc.poll() is None, "the dashboard died under load"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
