"""`ladder compare A B` on synthetic ladders built through the real CLI without training: a two-seed
ladder (A, compare_ladder.py) and its variant code70 (B) imported from finals drawn on a known law with a known effect
(`ladder import-results`), then compared. Bad input: an unfinished ladder, two ladders with no size in
common, a variant naming an unknown field or no variant at all: one line, exit 2, nothing written. The default
ladder itself (one seed a size) imported the same way: its paired noise measured on the sizes' scatter."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from patience import HANG_S

REPO = Path(__file__).resolve().parents[2]
LADDER = str(Path(sys.executable).parent / "ladder")
# Two seeds a size, so a pair's seed luck is measured (the default ladder has one seed a size).
TINY = str(Path(__file__).with_name("compare_ladder.py"))
DEFAULT = REPO / "experiments" / "tiny.py"  # the file that declares the variants
MARIN = str(REPO / "experiments" / "marin_moe_535b.py")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=HANG_S, cwd=REPO, env=env)


def law(c: float) -> float:
    return 1.0 + 40.0 * c ** -0.1


def shrinking(c: float) -> float:
    """B's compute-equivalent multiplier: 1.3x at 1e12 FLOPs, falling 17% a decade."""
    return 1.3 * (c / 1e12) ** -0.08


def write_finals(tmp: Path, drop: tuple[str, ...] = (), spec: str = TINY, multiplier=shrinking, luck: float = 0.004,
                 pair_luck: float = 0.001, seed: int = 0) -> tuple[Path, Path]:
    """A's and B's finals: each run on the law (B's at its multiplier), the luck of its seed shared by
    the pair of one seed (the same data order) and a small paired difference."""
    from ladder.spec import load_spec

    rng = np.random.default_rng(seed)
    rows_a, rows_b = [], []
    for run in load_spec(spec).all_runs():
        shared = math.exp(rng.normal(0.0, luck))
        rows_a.append({"name": run.name, "loss": law(run.flops) * shared})
        rows_b.append({"name": run.name, "loss": law(run.flops * multiplier(run.flops)) * shared
                       * math.exp(rng.normal(0.0, pair_luck))})
    a, b = tmp / "a.csv", tmp / "b.csv"
    pd.DataFrame(rows_a).to_csv(a, index=False)
    pd.DataFrame([r for r in rows_b if r["name"] not in drop]).to_csv(b, index=False)
    return a, b


@pytest.fixture(scope="module")
def pair_root(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compare")
    a, b = write_finals(tmp)
    root = tmp / "root"
    assert run_cli("import-results", TINY, str(a), "--root", str(root)).returncode == 0
    proc = run_cli("import-results", TINY, str(b), "--variant", "code70", "--root", str(root))
    assert proc.returncode == 0, proc.stderr
    assert "tiny+code70" in proc.stdout and "--variant code70" in proc.stdout
    return root


def test_compare_measures_a_shrinking_effect_and_carries_it_to_the_hero(pair_root, tmp_path):
    from ladder.spec import load_spec

    page = tmp_path / "compare.html"
    proc = run_cli("compare", TINY, TINY, "--variant-b", "code70", "--root", str(pair_root), "--draws", "60",
                   "--html", str(page), "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["a"]["ladder"] == "tiny" and d["b"]["ladder"] == "tiny+code70"
    effect = d["effect"]
    assert [r["size"] for r in effect["per_size"]] == [f"rung_{i}" for i in range(1, 6)]
    assert all(r["pairs"] == 2 and r["lower"] < r["multiplier"] < r["upper"] for r in effect["per_size"])
    assert effect["noise"]["mode"] == "paired"
    assert effect["trend"]["verdict"] == "shrinks" and "shrinks with scale" in d["verdict"]
    hero = effect["at_hero"]
    assert set(hero) >= {"multiplier", "lower", "upper", "delta", "delta_lower", "delta_upper"}
    true_hero = shrinking(load_spec(TINY).hero.flops)
    assert hero["lower"] < true_hero < hero["upper"]
    assert effect["backtest"]["ok"] and effect["backtest"]["size"] == "rung_5"
    heroes = effect["heroes"]  # both heroes were imported: their actual difference beside the band
    assert heroes["delta"] < 0 and heroes["inside"] in (True, False)
    assert d["html"] == str(page)
    text = page.read_text()
    assert "tiny+code70" in text and "shrinks with scale" in text
    figs = json.loads(text.split("const FIGS=", 1)[1].split(";const cfg=", 1)[0])
    names = {t.get("name") for t in figs["f-mult"]["data"]}
    assert {"per size", "trend (fitted on the sizes)", "at the hero (predicted)", "heroes (measured)"} <= names
    per_size = next(t for t in figs["f-mult"]["data"] if t.get("name") == "per size")
    assert per_size["y"] == pytest.approx([r["multiplier"] for r in effect["per_size"]])
    assert {t.get("name") for t in figs["f-delta"]["data"]} >= {"per size", "heroes (actual)"}
    # saved under B's folder for the dashboard, whose Compare page draws the same figures
    from ladder.dashboard.server import Dashboard

    saved = pair_root / "tiny+code70" / "compare" / "tiny.json"
    assert d["saved"] == str(saved) and json.loads(saved.read_text())["verdict"] == d["verdict"]
    status, body = Dashboard(pair_root).route("/api/ladders/tiny+code70/compare")
    assert status == 200
    (shown,) = json.loads(body.body)["comparisons"]
    assert shown["against"] == "tiny" and shown["verdict"] == d["verdict"]
    dash_sizes = next(t for t in shown["figures"]["mult"]["data"] if t.get("name") == "per size")
    assert dash_sizes["y"] == pytest.approx(per_size["y"])
    assert {t.get("name") for t in shown["figures"]["delta"]["data"]} >= {"per size", "heroes (actual)"}
    proc = run_cli("compare", TINY, TINY, "--variant-b", "code70", "--root", str(pair_root), "--draws", "30")
    assert proc.returncode == 0, proc.stderr
    assert "verdict: B's gain shrinks" in proc.stdout and "backtest: rung_5 predicted from" in proc.stdout
    assert f"saved: {saved}" in proc.stdout


def test_the_default_ladder_at_one_seed_a_size_measures_its_paired_noise_and_a_constant_effect_holds(tmp_path):
    """experiments/tiny.py trains one seed a size, the same seed in both ladders: the paired noise is the seven
    sizes' scatter about the trend (five degrees of freedom), not the prior, and the hero's band covers the effect."""
    a, b = write_finals(tmp_path, spec=str(DEFAULT), multiplier=lambda c: 1.2, luck=0.007, pair_luck=0.002, seed=1)
    root = tmp_path / "root"
    assert run_cli("import-results", str(DEFAULT), str(a), "--root", str(root)).returncode == 0
    proc = run_cli("import-results", str(DEFAULT), str(b), "--variant", "code70", "--root", str(root))
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("compare", str(DEFAULT), str(DEFAULT), "--variant-b", "code70", "--root", str(root), "--draws", "60",
                   "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    effect = d["effect"]
    assert len(effect["per_size"]) == 7 and all(r["pairs"] == 1 for r in effect["per_size"])
    noise = effect["noise"]
    assert noise["mode"] == "paired" and noise["pair_source"] == "residuals" and noise["pair_dof"] == 5
    assert effect["trend"]["verdict"] == "holds" and effect["trend"]["t_dof"] == 5
    hero = effect["at_hero"]
    assert hero["lower"] < 1.2 < hero["upper"] and d["verdict"].startswith("B's gain holds at the hero")
    assert effect["heroes"]["inside"]


def _one_line_refusal(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_an_unfinished_ladder_is_refused_and_nothing_is_written(tmp_path):
    a, b = write_finals(tmp_path, drop=("rung_5_r1", "hero"))
    root = tmp_path / "root"
    assert run_cli("import-results", TINY, str(a), "--root", str(root)).returncode == 0
    assert run_cli("import-results", TINY, str(b), "--variant", "code70", "--root", str(root)).returncode == 0
    page = tmp_path / "compare.html"
    proc = run_cli("compare", TINY, TINY, "--variant-b", "code70", "--root", str(root), "--html", str(page))
    _one_line_refusal(proc, "ladder B (tiny+code70) is unfinished", "rung_5_r1 (not run)")
    assert not page.exists() and not list(tmp_path.glob(".compare.html*"))


def test_two_ladders_with_no_size_in_common_are_refused(pair_root, tmp_path):
    from ladder.spec import load_spec

    rows = [{"name": r.name, "loss": 2.0 + r.model.params_active ** -0.1} for r in load_spec(MARIN).rungs]
    pd.DataFrame(rows).to_csv(tmp_path / "marin.csv", index=False)
    assert run_cli("import-results", MARIN, str(tmp_path / "marin.csv"), "--root", str(pair_root)).returncode == 0
    proc = run_cli("compare", TINY, MARIN, "--root", str(pair_root), "--html", str(tmp_path / "c.html"))
    _one_line_refusal(proc, "share no size", "d768", "rung_1")
    assert not (tmp_path / "c.html").exists()


def test_a_variant_naming_an_unknown_field_or_none_is_refused(tmp_path):
    spec = tmp_path / "tiny_bad.py"
    spec.write_text(DEFAULT.read_text().replace(
        '    variants={\n', '    variants={\n        "typo": {"runs.optim.weight_decayy": 0.0},\n'))
    root = tmp_path / "root"
    proc = run_cli("compare", str(spec), str(spec), "--variant-b", "typo", "--root", str(root))
    _one_line_refusal(proc, "variants['typo'] runs.optim.weight_decayy", "OptimSpec has no field 'weight_decayy'")
    proc = run_cli("submit", str(spec), "--root", str(root))  # every command loads the variants, used or not
    _one_line_refusal(proc, "variants['typo']")
    proc = run_cli("compare", TINY, TINY, "--variant-b", "nope", "--root", str(root))
    _one_line_refusal(proc, "--variant nope", "declares no such variant", "code70, dense")
    assert not root.exists()
