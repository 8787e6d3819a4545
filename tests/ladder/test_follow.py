"""`ladder follow` on the 535B ladder, offline: the hero's recorded points fed in steps of 5% of the run
(each poll a fresh process, so every poll also resumes), the forecast history in report.json and the
dashboard's data; alerts end to end through --on-alert on a file appended to while follow runs; bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from patience import wait_for

REPO = Path(__file__).resolve().parents[2]
LADDER = str(Path(sys.executable).parent / "ladder")
MARIN = str(REPO / "experiments" / "marin_moe_535b.py")
DATA = REPO / "fits" / "reference_data" / "marin_moe_535b"
DROPLESS = "eval_dropless/paloma/macro_loss"
HERO_STEPS = 390_251
BATCH_TOKENS = 11_264 * 4096


def run_cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env={**os.environ, "RAY_AUTH_MODE": "disabled", **(env or {})})


@pytest.fixture(scope="module")
def prior_root(tmp_path_factory) -> Path:
    """The 535B ladder forecast from its rungs alone (no hero point yet)."""
    root = tmp_path_factory.mktemp("follow-prior")
    assert run_cli("import-results", MARIN, str(DATA / "rung_curves.csv"), "--root", str(root)).returncode == 0
    proc = run_cli("submit", MARIN, "--root", str(root), "--no-progress", "--wandb", "disabled")
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return root


def fresh_root(prior_root: Path, tmp_path: Path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(prior_root, root)
    return root


def hero_rows() -> pd.DataFrame:
    frame = pd.read_csv(DATA / "hero_eval.csv")
    return frame[frame["metric"] == DROPLESS].reset_index(drop=True)


def write_rows(path: Path, rows: pd.DataFrame, header: bool) -> None:
    rows[["step", "tokens", "metric", "loss"]].to_csv(path, mode="w" if header else "a", header=header, index=False)


def follow_dir(root: Path) -> Path:
    return root / "marin_moe_535b" / "follow"


CUTS = [0.05, 0.10, 0.15, 0.20, 0.25, 0.30]


@pytest.fixture(scope="module")
def followed_root(prior_root, tmp_path_factory) -> Path:
    """The 535B hero's visible points fed to `ladder follow` 5% of the run at a time, one poll (process) each."""
    tmp = tmp_path_factory.mktemp("followed")
    root = fresh_root(prior_root, tmp)
    feed = tmp / "hero.csv"
    rows = hero_rows()
    for i, g in enumerate(CUTS):
        lo = CUTS[i - 1] if i else -1.0
        write_rows(feed, rows[(rows["frac"] > lo) & (rows["frac"] <= g)], header=(i == 0))
        proc = run_cli("follow", MARIN, "--from-csv", str(feed), "--root", str(root), "--max-polls", "1")
        assert proc.returncode == 0, proc.stderr[-2000:]
    return root


def test_535b_fed_in_5pct_steps_gives_the_forecast_history(followed_root):
    root, rows, cuts = followed_root, hero_rows(), CUTS
    state = json.loads((follow_dir(root) / "state.json").read_text())
    assert state["polls"] == 6 and state["last_step"] == 107_999 and not state["done"]
    proc = run_cli("report", MARIN, "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    hero = json.loads(proc.stdout)["hero"]
    snaps = hero["snapshots"]
    recorded = rows[rows["step"] > 0]
    want_at = [int(recorded[recorded["frac"] <= g + 1e-12]["step"].max()) for g in cuts]
    assert [s["at_step"] for s in snaps] == want_at
    assert hero["changes"] == [{"step": 108_000, "what": "data mix", "note": hero["changes"][0]["note"], "weights": {}}]
    horizon = json.loads((follow_dir(root) / "horizon.json").read_text())
    z = 1.6448536269514722
    for s in snaps:
        curve = s["curve"]
        assert set(curve[0]) == {"tokens", "loss", "lower", "upper"}
        assert curve[0]["tokens"] >= s["at_step"] * BATCH_TOKENS - 1 and curve[-1]["tokens"] == pytest.approx(HERO_STEPS * BATCH_TOKENS)
        assert all(c["lower"] <= c["loss"] <= c["upper"] for c in curve)
        # no band narrower than the rungs' measured snapshot error at its horizon, scaled to the hero's distance
        # past the largest rung (the rungs-only band bounds that part from above)
        from ladder.analysis.follow_bands import rungs_sigma

        frac = np.array([c["tokens"] for c in curve]) / (HERO_STEPS * BATCH_TOKENS)
        at = s["at_step"] / HERO_STEPS
        sigma = np.log(np.array([c["upper"] / c["loss"] for c in curve])) / z
        ahead = frac > at + 1e-9
        prior_curve = pd.DataFrame(hero["curve"])
        prior_sigma = np.log(np.interp(np.array([c["tokens"] for c in curve]), prior_curve["tokens"], prior_curve["upper"])
                             / np.interp(np.array([c["tokens"] for c in curve]), prior_curve["tokens"], prior_curve["loss"])) / z
        need = np.minimum(rungs_sigma(horizon, np.log(frac[ahead] / at), horizon["hero_decades"]), prior_sigma[ahead])
        assert horizon["decade_power"] > 0 and np.all(sigma[ahead] >= need - 1e-6)
        if s.get("later_points"):
            # every later visible point inside (measured: all of them); Marin's curve scored on the same points
            assert s["later_inside_band"] >= 0.9
            assert s["later_marin_mean_abs_rel_error"] > 0
        # past the declared switch with no point after it, the band is at least the rungs-only band
        prior = {round(p["tokens"]): p for p in hero["curve"]}
        final_prior = hero["curve"][-1]
        assert curve[-1]["upper"] / curve[-1]["loss"] >= final_prior["upper"] / final_prior["loss"] - 1e-9
        assert prior  # the prior curve is in the report beside the snapshots
    # the dashboard's hero page: the forecast history, one x unit, the change and the events
    from ladder.dashboard.data import Root

    page = Root(root).hero("marin_moe_535b")
    assert [int(f["at_step"]) for f in page["forecasts"]] == want_at
    assert page["changes"][0]["step"] == 108_000 and page["changes"][0]["tokens"] == 108_000 * BATCH_TOKENS
    for snap in page["snapshots"]:
        assert min(snap["tokens"]) > 1e9  # tokens, like the actual (not steps)
    lines = run_cli("report", MARIN, "--root", str(root)).stdout
    assert "declared change at step 108,000: data mix" in lines and "Marin's curve on the same points" in lines


def test_an_imported_hero_reports_the_snapshots_and_bands_of_a_followed_one(prior_root, followed_root, tmp_path):
    """One live rule for every hero: the same visible points imported with `ladder import-results` give the
    report the followed hero's snapshots, finals, bands, whole curves and scores on the later points."""
    root = fresh_root(prior_root, tmp_path)
    hero = hero_rows().assign(name="d6144")[["name", "step", "tokens", "loss"]]
    hero.to_csv(tmp_path / "hero.csv", index=False)
    assert run_cli("import-results", MARIN, str(tmp_path / "hero.csv"), "--root", str(root)).returncode == 0
    proc = run_cli("submit", MARIN, "--root", str(root), "--no-progress", "--wandb", "disabled")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    reports = []
    for r in (root, followed_root):
        proc = run_cli("report", MARIN, "--root", str(r), "--json")
        assert proc.returncode == 0, proc.stderr[-2000:]
        reports.append(json.loads(proc.stdout)["hero"]["snapshots"])
    imported, followed = reports
    assert [s["at_step"] for s in imported] == [s["at_step"] for s in followed] and len(imported) == len(CUTS)
    # The two reach the refit through different files (the feed's CSV and follow's jsonl, the eval.jsonl of the
    # import), so the optimiser's last digits differ: measured at most ~1e-9 relative; 1e-6 leaves room for
    # another CPU's rounding and is far below any difference of rule (the earlier rule's bands were 30% narrower).
    for a, b in zip(imported, followed, strict=True):
        assert a["band_rule"] == b["band_rule"] and a["centre_rule"] == b["centre_rule"]
        for key in ("predicted_final", "lower", "upper", "half_width", "later_mean_abs_rel_error",
                    "later_inside_band", "later_mean_band_half_width", "later_marin_mean_abs_rel_error"):
            assert (a.get(key) is None) == (b.get(key) is None), key
            if a.get(key) is not None:
                assert a[key] == pytest.approx(b[key], rel=1e-6), key
        got, want = pd.DataFrame(a["curve"]), pd.DataFrame(b["curve"])
        assert len(got) == len(want)
        for col in ("tokens", "loss", "lower", "upper"):
            np.testing.assert_allclose(got[col], want[col], rtol=1e-6, err_msg=col)


def _state(root: Path) -> dict:
    path = follow_dir(root) / "state.json"
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def test_alerts_fire_once_per_excursion_through_on_alert(prior_root, tmp_path):
    root = fresh_root(prior_root, tmp_path)
    feed, got = tmp_path / "hero.csv", tmp_path / "alerts.jsonl"
    rows = hero_rows()
    first = rows[rows["frac"] <= 0.10]
    rest = rows[rows["frac"] > 0.10].reset_index(drop=True)
    write_rows(feed, first, header=True)
    hook = (f"{sys.executable} -c \"import json,os,sys; e=json.load(sys.stdin); "
            f"e['env_kind']=os.environ['LADDER_ALERT_KIND']; e['env_step']=os.environ['LADDER_ALERT_STEP']; "
            f"open({str(got)!r},'a').write(json.dumps(e)+'\\n')\"")
    t0 = time.monotonic()
    proc = subprocess.Popen([LADDER, "follow", MARIN, "--from-csv", str(feed), "--root", str(root), "--every", "0.2s",
                             "--stall", "3", "--alert-move", "0.5", "--on-alert", hook],
                            cwd=REPO, env={**os.environ, "RAY_AUTH_MODE": "disabled"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _state(root).get("polls", 0) >= 1, "the first poll", bound=600)
        limit = 40 * (time.monotonic() - t0) + 30  # a generous multiple of the first poll (which also fits the rungs)

        def latest_curve() -> pd.DataFrame:
            at = _state(root)["snapshots"][-1]["at_step"]
            return pd.read_csv(follow_dir(root) / "forecasts" / f"{at}.csv")

        def append(step: int, loss: float) -> None:
            write_rows(feed, pd.DataFrame([{"step": step, "tokens": step * BATCH_TOKENS, "metric": DROPLESS,
                                            "loss": loss}]), header=False)
            wait_for(lambda: _state(root).get("last_step") == step, f"step {step} to be read", bound=limit)

        def centre(step: int) -> float:
            c = latest_curve()
            return float(np.interp(step, c["step"], c["loss"]))

        def outside(step: int, side: str) -> float:
            c = latest_curve()
            edge = float(np.interp(step, c["step"], c["upper" if side == "above" else "lower"]))
            return edge * (1.05 if side == "above" else 0.95)

        s = [int(x) for x in rest["step"][:6]]
        append(s[0], outside(s[0], "above"))  # excursion 1: two points above, one alert
        append(s[1], outside(s[1], "above"))
        append(s[2], centre(s[2]))  # back inside
        append(s[3], outside(s[3], "below"))  # excursion 2
        append(s[4], outside(s[4], "above"))  # excursion 3: straight to the other side
        polls = _state(root)["polls"]
        wait_for(lambda: any(e["kind"] == "stalled" for e in _state(root).get("events", [])), "the stall alert", bound=limit)
        assert _state(root)["polls"] >= polls + 3
        # the run's last step ends follow by itself
        final = HERO_STEPS - 1
        write_rows(feed, pd.DataFrame([{"step": final, "tokens": final * BATCH_TOKENS, "metric": DROPLESS,
                                        "loss": centre(final)}]), header=False)
        out, err = proc.communicate(timeout=limit)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    assert "reached its last step" in out
    events = [json.loads(x) for x in (follow_dir(root) / "events.jsonl").read_text().splitlines()]
    alerts = [e for e in events if e["alert"]]
    kinds = [e["kind"] for e in alerts]
    assert kinds.count("band_exit") == 3 and kinds.count("stalled") == 1 and kinds.count("forecast_moved") == 0
    assert [(e["step"], e["side"]) for e in alerts if e["kind"] == "band_exit"] == [(s[0], "above"), (s[3], "below"),
                                                                                   (s[4], "above")]
    assert [e["step"] for e in events if e["kind"] == "change"] == [108_000]
    delivered = [json.loads(x) for x in got.read_text().splitlines()]
    assert len(delivered) == len(alerts) == 4
    for d, e in zip(delivered, alerts, strict=True):
        assert d["env_kind"] == e["kind"] and json.loads(d["env_step"]) == e["step"]
        assert {k: v for k, v in d.items() if not k.startswith("env_")} == e
    # a restart after the end does nothing and sends nothing again
    again = run_cli("follow", MARIN, "--from-csv", str(feed), "--root", str(root))
    assert again.returncode == 0 and "already reached its last step" in again.stdout
    assert len(got.read_text().splitlines()) == 4


def test_bad_input_one_line_exit_2_nothing_written(prior_root, tmp_path):
    root = fresh_root(prior_root, tmp_path)
    history = tmp_path / "history.csv"
    history.write_text("_step,train/loss\n100,3.2\n200,3.1\n")
    cases = [
        ("--from-csv", str(history)),  # no eval metric in it
        ("--from-csv", str(tmp_path / "missing.csv")),
        ("--hero", "marin-community/marin_moe/hero-12d8b6f0-dee637,hero-mix-996f4891-step108k"),  # no W&B key here
        ("--hero", "not-a-run-path"),
    ]
    for args in cases:
        proc = run_cli("follow", MARIN, *args, "--root", str(root), env={"WANDB_API_KEY": ""})
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stderr.startswith("error: ") and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not follow_dir(root).exists()
    spec = tmp_path / "beyond.py"
    spec.write_text("import dataclasses, runpy\n"
                    f"base = runpy.run_path({MARIN!r})['LADDER']\n"
                    "from ladder.spec import RunChange\n"
                    "LADDER = dataclasses.replace(base, hero=dataclasses.replace(base.hero, "
                    "changes=(RunChange(500_000, 'data mix'),)))\n")
    feed = tmp_path / "hero.csv"
    write_rows(feed, hero_rows().head(5), header=True)
    proc = run_cli("follow", str(spec), "--from-csv", str(feed), "--root", str(root))
    assert proc.returncode == 2 and "hero.changes[0].step: 500000 is beyond the run's 390251 steps" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not follow_dir(root).exists()
    bare = tmp_path / "bare"
    proc = run_cli("follow", MARIN, "--from-csv", str(feed), "--root", str(bare))
    assert proc.returncode == 2 and "ladder submit" in proc.stderr and not (bare / "marin_moe_535b" / "follow").exists()


def test_follow_a_hero_trained_here(ladder_smoke_root, tmp_path):
    """The same loop on the smoke ladder (rungs trained here, their eval points choose the curve law): the
    hero's eval.jsonl fed in two halves, each a poll; the run's last step ends it; the report carries it."""
    root = tmp_path / "root"
    shutil.copytree(ladder_smoke_root, root, ignore=shutil.ignore_patterns("wandb", "checkpoints", "follow"))
    smoke = str(REPO / "experiments" / "smoke.py")
    hero_dir = next((root / "smoke").glob("hero-*"))
    rows = (hero_dir / "eval.jsonl").read_text().splitlines()
    feed = tmp_path / "eval.jsonl"
    feed.write_text("\n".join(rows[: len(rows) // 2]) + "\n")
    proc = run_cli("follow", smoke, "--from-jsonl", str(feed), "--root", str(root), "--max-polls", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "done" not in proc.stdout
    with feed.open("a") as fh:
        fh.write("\n".join(rows[len(rows) // 2:]) + "\n")
    proc = run_cli("follow", smoke, "--from-jsonl", str(feed), "--root", str(root), "--max-polls", "5")
    assert proc.returncode == 0 and "reached its last step" in proc.stdout, proc.stdout + proc.stderr
    rep = run_cli("report", smoke, "--root", str(root), "--json")
    assert rep.returncode == 0, rep.stderr[-2000:]
    hero = json.loads(rep.stdout)["hero"]
    last = json.loads(rows[-1])["step"]
    assert hero["follow"]["done"] and hero["follow"]["last_step"] == last and hero["follow"]["polls"] == 2
    assert [s["at_step"] for s in hero["snapshots"]] == [json.loads(rows[len(rows) // 2 - 1])["step"], last]
    first = hero["snapshots"][0]
    assert first["later_points"] == len(rows) - len(rows) // 2 and first["curve"][-1]["tokens"] > first["curve"][0]["tokens"]


def test_from_jsonl_url_and_retry_when_it_is_unreachable(prior_root, tmp_path):
    """A JSONL served over http is followed like a file; an unreachable URL is one line and exit 2 on the first
    poll, or retried with --retry (each failure one line) until --until, with nothing written."""
    import functools
    import http.server
    import socket
    import threading

    root = fresh_root(prior_root, tmp_path)
    served = tmp_path / "served"
    served.mkdir()
    rows = hero_rows()
    rows = rows[(rows["step"] > 0) & (rows["frac"] <= 0.1)]
    (served / "hero.jsonl").write_text("".join(json.dumps({"step": int(r.step), "tokens": int(r.tokens),
                                                            "eval_loss": float(r.loss)}) + "\n" for r in rows.itertuples()))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hero.jsonl"
        proc = run_cli("follow", MARIN, "--from-jsonl", url, "--root", str(root), "--max-polls", "1")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads((follow_dir(root) / "state.json").read_text())["last_step"] == int(rows["step"].max())
    finally:
        server.shutdown()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/hero.jsonl"
    other = fresh_root(prior_root, tmp_path / "other")
    proc = run_cli("follow", MARIN, "--from-jsonl", dead, "--root", str(other))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "--retry" in proc.stderr
    proc = run_cli("follow", MARIN, "--from-jsonl", dead, "--root", str(other), "--retry", "--every", "1s", "--until", "4s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    tries = [line for line in proc.stdout.splitlines() if line.startswith("poll failed")]
    assert len(tries) >= 1 and all("retrying in" in line for line in tries)
    assert not follow_dir(other).exists()


def test_wandb_without_a_network_one_line_or_retried_then_a_restart_carries_on(prior_root, tmp_path):
    """The real wandb library against a W&B address that refuses connections (WANDB_BASE_URL at a local port bound
    but never listening, held so nothing else takes it): the first poll gives up after --timeout with one line that
    states it, exit 2, nothing written; with --retry each failed poll is one line and nothing is written. A follow
    that has polled before retries without being asked, leaves its state as it was, and a restart carries on."""
    import socket

    root = fresh_root(prior_root, tmp_path)
    rows = hero_rows()
    rows = rows[rows["step"] > 0]
    hero = "ent/proj/hero-a,hero-b"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        env = {"WANDB_API_KEY": "x" * 40, "WANDB_BASE_URL": f"http://127.0.0.1:{held.getsockname()[1]}"}
        wandb_follow = ("follow", MARIN, "--hero", hero, "--timeout", "2s", "--root", str(root))
        proc = run_cli(*wandb_follow, env=env)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "ent/proj/hero-a" in proc.stderr and "did not answer within 2s" in proc.stderr and "--retry" in proc.stderr
        assert not follow_dir(root).exists()
        proc = run_cli(*wandb_follow, "--retry", "--every", "1s", "--until", "4s", env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        tries = [line for line in proc.stdout.splitlines() if line.startswith("poll failed")]
        assert tries and all("did not answer within 2s" in t and "retrying in" in t for t in tries), proc.stdout
        assert not follow_dir(root).exists()
        feed = tmp_path / "hero.csv"
        write_rows(feed, rows[rows["frac"] <= 0.10], header=True)
        assert run_cli("follow", MARIN, "--from-csv", str(feed), "--root", str(root), "--max-polls", "1").returncode == 0
        before = {p.name: p.read_bytes() for p in follow_dir(root).rglob("*") if p.is_file()}
        proc = run_cli(*wandb_follow, "--every", "1s", "--until", "4s", env=env)  # no --retry: it has polled before
        assert proc.returncode == 0 and proc.stdout.startswith("poll failed"), proc.stdout + proc.stderr
        assert {p.name: p.read_bytes() for p in follow_dir(root).rglob("*") if p.is_file()} == before
    write_rows(feed, rows[(rows["frac"] > 0.10) & (rows["frac"] <= 0.20)], header=False)
    assert run_cli("follow", MARIN, "--from-csv", str(feed), "--root", str(root), "--max-polls", "1").returncode == 0
    state = _state(root)
    assert state["polls"] == 2 and state["last_step"] == int(rows[rows["frac"] <= 0.20]["step"].max())
    assert [s["at_step"] for s in state["snapshots"]] == [int(rows[rows["frac"] <= g]["step"].max()) for g in (0.10, 0.20)]


def test_follow_carries_task_metrics_into_the_heros_rows(prior_root, tmp_path):
    """Task columns an eval row carries (ours: task_acc/<task>, task_bpb/<task>; OLMo's W&B names) reach the
    followed hero's points and its hero_actual rows, each row holding only the tasks its eval scored."""
    root = fresh_root(prior_root, tmp_path)
    rows = hero_rows()
    rows = rows[(rows["step"] > 0) & (rows["frac"] <= 0.1)].reset_index(drop=True)
    feed = tmp_path / "hero.jsonl"
    lines = []
    for i, r in enumerate(rows.itertuples()):
        row = {"step": int(r.step), "tokens": int(r.tokens), "eval_loss": float(r.loss),
               "task_acc/cloze": 0.3 + 0.01 * i, "task_bpb/cloze": 2.0 - 0.01 * i}
        if i % 2:  # scored at every other eval only
            row["eval/downstream/hellaswag_rc_5shot_len_norm"] = 0.5 + 0.01 * i
        lines.append(json.dumps(row))
    feed.write_text("\n".join(lines) + "\n")
    proc = run_cli("follow", MARIN, "--from-jsonl", str(feed), "--root", str(root), "--max-polls", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    for path in (follow_dir(root) / "points.jsonl", root / "marin_moe_535b" / "imported" / "hero_actual" / "metrics.jsonl"):
        got = [json.loads(x) for x in path.read_text().splitlines()]
        assert [g["step"] for g in got] == rows["step"].astype(int).tolist()
        for i, g in enumerate(got):
            assert g["task_acc/cloze"] == pytest.approx(0.3 + 0.01 * i)
            assert g["task_bpb/cloze"] == pytest.approx(2.0 - 0.01 * i)
            assert g.get("eval/downstream/hellaswag_rc_5shot_len_norm") == (pytest.approx(0.5 + 0.01 * i) if i % 2 else None)
