"""The dashboard's HTTP API: views, CSV downloads, read-only, loopback, no path traversal,
half-written and missing files."""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import time
import urllib.error
import urllib.request

import pytest

from ladder.dashboard.data import Root
from ladder.dashboard.server import DashboardServer
from ladder.outputs import layout, readers


def get(url: str, headers: dict | None = None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def raw(server, request_line: str, host: str = "127.0.0.1") -> tuple[int, bytes]:
    """Send a request line as is (no client-side normalisation of '..' or '%2e')."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(f"{request_line}\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_binds_loopback_by_default(sample_root):
    s = DashboardServer(sample_root, port=0)
    try:
        assert s.httpd.server_address[0] == "127.0.0.1"
    finally:
        s.httpd.server_close()


def test_views(server):
    status, headers, body = get(server.url + "api/ladders")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert [lad["name"] for lad in json.loads(body)["ladders"]] == ["demo"]
    ov = json.loads(get(server.url + "api/ladders/demo/overview")[2])
    statuses = {s["name"]: s["status"] for s in ov["steps"]}
    assert statuses == {"rung_1": "SUCCESS", "rung_2": "SUCCESS", "rung_3": "SUCCESS", "rung_4": "SUCCESS",
                        "fit": "SUCCESS", "predict": "SUCCESS", "gate": "SUCCESS", "hero": "RUNNING",
                        "report": "PENDING"}
    assert ["rung_3", "fit"] in ov["edges"] and ["gate", "hero"] in ov["edges"]
    fit = json.loads(get(server.url + "api/ladders/demo/fit")[2])
    assert fit["law"]["law"] == "compute" and len(fit["runs"]) == 4
    assert fit["hero"]["lower"] < fit["hero"]["loss"] < fit["hero"]["upper"]
    assert [t["name"] for t in fit["targets"]] == ["1.6B-x10"]
    assert fit["backtest"][0]["predict"] == "rung_4" and fit["backtest"][0]["flops"] > 0
    assert all(c["lower"] <= c["loss"] <= c["upper"] for c in fit["curve"])
    hero = json.loads(get(server.url + "api/ladders/demo/hero")[2])
    assert hero["status"] == "RUNNING" and len(hero["forecasts"]) == 4 and len(hero["snapshots"]) == 4
    assert hero["actual"]["n"] > 100 and hero["exits"]
    moe = json.loads(get(server.url + "api/ladders/demo/moe")[2])
    h = next(r for r in moe["runs"] if r["name"] == "hero")
    assert h["bias_keys"] == [f"router_bias_norm_l{i}" for i in range(4)] and len(h["events"]) == 3
    rungs = json.loads(get(server.url + "api/ladders/demo/rungs")[2])
    assert rungs["domains"] == ["code", "prose"] and len(rungs["runs"]) == 5


def test_every_table_downloads_as_csv(server):
    tables = json.loads(get(server.url + "api/ladders/demo/tables")[2])["tables"]
    names = {t["name"] for t in tables}
    assert {"steps", "metrics.hero", "eval.rung_1", "events.hero", "runs", "fit_params", "backtest", "law_curve",
            "hero_curve", "targets", "forecasts", "band_exits"} <= names
    for t in tables:
        status, headers, body = get(server.url + f"api/ladders/demo/tables/{t['name']}.csv")
        assert status == 200, t
        assert headers["Content-Type"].startswith("text/csv") and "attachment" in headers["Content-Disposition"]
        rows = list(csv.DictReader(io.StringIO(body.decode())))
        assert rows or t["name"].startswith("events."), t
    # the CSV holds every row (charts are thinned, downloads never)
    body = get(server.url + "api/ladders/demo/tables/metrics.rung_2.csv")[2].decode()
    assert len(body.strip().splitlines()) - 1 == sum(1 for _ in layout.iter_jsonl(
        next((server.app.root.path / "demo").glob("rung_2-*")) / layout.METRICS))


@pytest.mark.parametrize("target", [
    "/../../etc/passwd", "/static/../../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/%2E%2E/%2E%2E/etc/passwd",
    "/static/%2e%2e/server.py", "/static/..%2fserver.py", "/static/%2e%2e%2fdata.py", "/static/..%5cserver.py",
    "/api/ladders/..%2f..%2fetc/overview", "/api/ladders/demo/tables/..%2f..%2f..%2fetc%2fpasswd.csv",
    "//etc/passwd", "/static//etc/passwd", "/%252e%252e/%252e%252e/etc/passwd", "/static/%00app.js",
    "/api/ladders/demo/tables/metrics.%2e%2e.csv", "/api/ladders/.index/overview",
    "/static/data.py", "/static/sample.py", "/etc/passwd", "/api/ladders/demo/../../../etc/passwd",
])
def test_path_traversal_refused(server, target):
    status, body = raw(server, f"GET {target} HTTP/1.1")
    assert status in (400, 404), (target, status)
    assert b"root:" not in body and b"import" not in body


def test_absolute_uri_and_bad_requests(server):
    status, body = raw(server, "GET http://127.0.0.1/etc/passwd HTTP/1.1")
    assert status in (400, 404) and b"root:" not in body
    status, _ = raw(server, "GET /api/ladders/demo/overview HTTP/1.1", host="evil.example:8765")
    assert status == 403  # DNS rebinding: a loopback server answers loopback names only
    status, _ = raw(server, "GET /api/ladders/demo/overview HTTP/1.1", host=f"localhost:{server.port}")
    assert status == 200


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_read_only(server, method):
    status, _ = raw(server, f"{method} /api/ladders HTTP/1.1")
    assert status == 405


def test_static_assets_local_and_cached(server):
    status, headers, body = get(server.url + "static/plotly.min.js", {"Accept-Encoding": "gzip"})
    assert status == 200 and headers.get("Content-Encoding") == "gzip" and len(body) > 500_000
    status2, _, _ = get(server.url + "static/plotly.min.js", {"If-None-Match": headers["ETag"]})
    assert status2 == 304
    page = get(server.url)[2].decode()
    assert "http://" not in page and "https://" not in page  # nothing from a CDN
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    for name in ("app.js", "moe.js"):
        js = get(server.url + "static/" + name)[2].decode()
        assert "RENDER" in js and "https://" not in js and "cdn" not in js.lower()


def test_half_written_and_missing_files(tmp_path):
    """A ladder mid-run: garbled lines, a half-written last line, a truncated JSON, missing files."""
    ld = tmp_path / "mid"
    d = ld / "rung_1-aaaa"
    d.mkdir(parents=True)
    (d / layout.STATUS).write_text('{"status": "RUNNING", "heartb')  # half-written JSON
    (d / layout.METRICS).write_text('{"step": 1, "tokens": 10, "loss": 5.0}\nnot json\n[1,2]\n'
                                    '{"step": 2, "tokens": 20, "loss": 4.5}\n{"step": 3, "tok')
    (d / layout.EVAL).write_text("")
    (ld / "fit-bbbb").mkdir()
    (ld / "fit-bbbb" / layout.FIT).write_text("{")
    (ld / "fit-bbbb" / layout.RUNS_CSV).write_text("name,flops,loss\nrung_1,1e15,4.0\nrung_2,2e15")
    (ld / "predict-cccc").mkdir()
    (ld / "predict-cccc" / layout.HERO_CURVE).write_text("step,loss,lower,upper\n1,5,4,6\n2,")
    with DashboardServer(tmp_path, port=0, cache_s=0) as s:
        for view in ("overview", "rungs", "fit", "hero", "moe", "tables"):
            status, _, body = get(s.url + f"api/ladders/mid/{view}")
            assert status == 200, (view, body)
            json.loads(body)
        rungs = json.loads(get(s.url + "api/ladders/mid/rungs")[2])
        assert rungs["runs"][0]["train"]["step"] == [1, 2]
        fit = json.loads(get(s.url + "api/ladders/mid/fit")[2])
        assert [r["name"] for r in fit["runs"]] == ["rung_1"]  # the truncated row is dropped
        # the writer finishes its line: the row appears
        with (d / layout.METRICS).open("a") as fh:
            fh.write('ens": 30, "loss": 4.2}\n')
        rungs = json.loads(get(s.url + "api/ladders/mid/rungs")[2])
        assert rungs["runs"][0]["train"]["step"] == [1, 2, 3]
        # a file replaced by a shorter one (a restarted run) is re-read from the start
        (d / layout.METRICS).write_text('{"step": 1, "tokens": 10, "loss": 5.5}\n')
        rungs = json.loads(get(s.url + "api/ladders/mid/rungs")[2])
        assert rungs["runs"][0]["train"]["loss"] == [5.5]
        for name in ("steps", "metrics.rung_1", "runs", "hero_curve"):
            assert get(s.url + f"api/ladders/mid/tables/{name}.csv")[0] == 200
        assert get(s.url + "api/ladders/mid/tables/forecasts.csv")[0] == 404
        assert get(s.url + "api/ladders/nope/overview")[0] == 404


def test_index_and_newest_dir(tmp_path):
    """.index wins; without it the newest <step>-* dir; an index pointing outside the ladder is ignored."""
    ld = tmp_path / "lad"
    old, new = ld / "rung_1-old", ld / "rung_1-new"
    for p in (old, new):
        p.mkdir(parents=True)
        layout.write_json_atomic(p / layout.STATUS, {"status": "SUCCESS"})
    os.utime(old, (time.time() - 100, time.time() - 100))
    os.utime(old / layout.STATUS, (time.time() - 100, time.time() - 100))
    root = Root(tmp_path)
    assert root.step_dirs("lad")["rung_1"].name == "rung_1-new"
    layout.write_json_atomic(ld / ".index" / "rung_1.json", {"dir": "rung_1-old"})
    assert root.step_dirs("lad")["rung_1"].name == "rung_1-old"
    outside = tmp_path / "elsewhere-xyz"
    outside.mkdir()
    layout.write_json_atomic(ld / ".index" / "rung_1.json", {"path": str(outside)})
    layout.write_json_atomic(ld / ".index" / "fit.json", {"path": "../../../etc"})
    dirs = root.step_dirs("lad")
    assert dirs["rung_1"].name == "rung_1-new" and "fit" not in dirs


def test_band_exits():
    """Points are judged from 10% of the predicted run to its end, on interval means where logged,
    one row per step (the last wins), the band interpolated at each point."""
    predicted = [{"step": 0, "loss": 3.0, "lower": 2.9, "upper": 3.1}, {"step": 100, "loss": 2.0, "lower": 1.9, "upper": 2.1}]
    actual = [{"step": 8, "loss": 9.0}, {"step": 50, "loss": 2.0}, {"step": 50, "loss": 2.7}, {"step": 60, "loss": 9.0, "loss_mean": 2.2},
              {"step": 70, "loss": 2.3}, {"step": 500, "loss": 9.0}]
    cmp = readers.compare(predicted, readers.actual_series(actual))
    assert cmp["x"] == "step" and cmp["start"] == pytest.approx(10.0)
    assert [p["step"] for p in cmp["points"]] == [50, 60, 70]  # step 8 is the initial descent; 500 is past the run
    exits = readers.exits(cmp["points"])
    assert [(e["step"], e["side"]) for e in exits] == [(50, "above"), (60, "below")]
    assert exits[0]["upper"] == pytest.approx(2.6) and exits[0]["error"] == pytest.approx(2.5 / 2.7 - 1)
    assert readers.exit_stretches(cmp["points"]) == [
        {"from_step": 50, "to_step": 50, "side": "above", "max_gap": pytest.approx(0.1), "points": 1},
        {"from_step": 60, "to_step": 60, "side": "below", "max_gap": pytest.approx(0.1), "points": 1}]
    baseline = [{"step": 40, "loss": 2.8}, {"step": 80, "loss": 2.4}]
    marin = readers.compare(predicted, readers.actual_series(actual), baseline)["points"]
    assert [p["marin"] for p in marin] == [pytest.approx(2.7), pytest.approx(2.6), pytest.approx(2.5)]
    assert marin[0]["marin_error"] == pytest.approx(0.0, abs=1e-12)


def test_live_refresh_through_api(tmp_path):
    """Appending rows shows up in the next poll once the answer cache has expired."""
    from bench.sample import write_sample_root

    write_sample_root(tmp_path, "demo", hero_frac=0.2)
    hero = next((tmp_path / "demo").glob("hero-*"))
    with DashboardServer(tmp_path, port=0, cache_s=0.3) as s:
        n0 = json.loads(get(s.url + "api/ladders/demo/hero")[2])["actual"]["n"]
        time.sleep(0.35)
        with (hero / layout.METRICS).open("a") as fh:
            fh.write("\n" + json.dumps({"step": 43200, "tokens": 2.3e10, "loss": 2.69}) + "\n")
        n1 = json.loads(get(s.url + "api/ladders/demo/hero")[2])["actual"]["n"]
    assert n1 == n0 + 1


def test_jsonl_reader_concurrent_with_writer(tmp_path):
    """Request threads read while a run appends: no errors, every read a consistent prefix."""
    import threading

    from ladder.dashboard.data import FileCache

    path = tmp_path / "metrics.jsonl"
    path.write_text("")
    cache = FileCache()
    errors, done = [], threading.Event()

    def reader():
        while not done.is_set():
            try:
                t = cache.jsonl(path)
                steps = t.column("step")
                if steps is not None and len(steps):
                    assert list(steps) == list(range(1, len(steps) + 1)), "rows out of order"
                    assert t.column("loss") is not None and len(t.column("loss")) == len(steps)
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc))
                return

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for th in threads:
        th.start()
    with path.open("a") as fh:
        for i in range(1, 3001):
            line = json.dumps({"step": i, "loss": 1.0 / i, "note": "x" if i % 100 == 0 else None})
            fh.write(line[: len(line) // 2])
            fh.flush()
            fh.write(line[len(line) // 2:] + "\n")
            fh.flush()
    done.set()
    for th in threads:
        th.join()
    assert errors == []
    t = cache.jsonl(path)
    assert len(t) == 3000 and t[99]["note"] == "x" and t[-1]["step"] == 3000 and isinstance(t[0]["step"], int)
