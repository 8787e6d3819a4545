"""Task-accuracy laws (fits.tasks, fits.tasks_forecast, fits.laws.tasks) on synthetic ladders whose
truth is known, the law registry they go in through, and OLMo's column mapping."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fits.errors import InputError
from fits.laws.chinchilla import ChinchillaLaw
from fits.laws.registry import REGISTRY, build_law, in_compute, law_entry, law_names, resample_function
from fits.laws.tasks import BoundedSigmoidLaw
from fits.olmo_tasks import MMLU_WEIGHTS, OLMO_TASKS, olmo_metrics
from fits.result import FitResult
from fits.tasks import finals, fit_chain, fit_sigmoid
from fits.tasks_forecast import TaskColumns, backtest, forecast_task

TRUE_LOSS = ChinchillaLaw(E=0.6, A=60.0, B=45.0, alpha=0.3, beta=0.25)
TRUE_ACC = BoundedSigmoidLaw(k=9.0, L0=0.95, chance=0.25)
COLS = TaskColumns(task="synthetic", loss="task_bpb/synthetic", acc="task_acc/synthetic", chance=0.25,
                   intermediate="loss")


def ladder(noise: float = 0.004, seed: int = 0) -> pd.DataFrame:
    """4 sizes x 4 token multiples, 20 evals each: task loss on the Chinchilla law at the tokens seen,
    accuracy on the bounded sigmoid of it plus binomial-like noise, an intermediate loss monotone in it."""
    rng = np.random.default_rng(seed)
    rows = []
    for N in (1e8, 2e8, 4e8, 8e8):
        for k in (1, 2, 5, 10):
            D = 20.0 * k * N * np.linspace(0.05, 1.0, 20)
            L = TRUE_LOSS.predict(N, D)
            acc = TRUE_ACC.predict(L) + rng.normal(0.0, noise, L.size)
            rows.append(pd.DataFrame({"run": f"{N:.0e}-{k}x", "params": N, "tokens": D, "task_bpb/synthetic": L,
                                      "task_acc/synthetic": acc, "loss": 1.4 * L + 0.9}))
    return pd.concat(rows, ignore_index=True)


def test_the_two_step_chain_recovers_known_parameters():
    pts = ladder()
    res = fit_chain(pts, COLS.loss, COLS.acc, chance=0.25)
    law = res.model()
    # step 2 on 256 checkpoints with 0.4-point noise: the sigmoid's turn and slope to about 1%
    assert law.step2.k == pytest.approx(TRUE_ACC.k, rel=0.05)
    assert law.step2.L0 == pytest.approx(TRUE_ACC.L0, abs=0.01)
    # step 1 on 16 noise-free finals: the loss 10x beyond the largest size, to 0.5%
    N, D = 8e9, 2e12
    assert float(law.loss(N, D)) == pytest.approx(float(TRUE_LOSS.predict(N, D)), rel=0.005)
    assert float(law.predict(N, D)) == pytest.approx(float(TRUE_ACC.predict(TRUE_LOSS.predict(N, D))), abs=0.01)
    # a FitResult round-trips through JSON and the registry to the same law
    again = FitResult.from_json(res.to_json())
    assert float(again.predict(N, D)) == pytest.approx(float(res.predict(N, D)), rel=1e-12)


def test_the_paper_s_free_sigmoid_has_four_parameters_and_fits_the_points():
    pts = ladder()
    late = pts[pts["tokens"] > 0]
    res = fit_sigmoid(late[COLS.loss], late[COLS.acc])
    assert set(res.params) == {"a", "k", "L0", "b"} and res.params["a"] < 0
    assert res.diagnostics["scatter"] < 0.006  # the 0.4-point noise, not a misfit


def test_method_choice_uses_only_the_rungs():
    """The target enters only the prediction: two far-apart targets get one choice, one backtest."""
    pts = ladder()
    a = forecast_task(pts, COLS, 4e9, 1e12, n_resamples=10)
    b = forecast_task(pts, COLS, 2e10, 6e12, n_resamples=10)
    assert a.diagnostics["method"] == b.diagnostics["method"]
    assert a.diagnostics["choice"]["mae"] == b.diagnostics["choice"]["mae"]
    assert a.diagnostics["backtest"] == b.diagnostics["backtest"]
    fa, fb = a.diagnostics["forecast"], b.diagnostics["forecast"]
    assert fb["decades"] > fa["decades"] and fb["sigma"] > fa["sigma"]  # farther out, wider
    for f, (N, D) in ((fa, (4e9, 1e12)), (fb, (2e10, 6e12))):
        truth = float(TRUE_ACC.predict(TRUE_LOSS.predict(N, D)))
        assert f["lower"] <= truth <= f["upper"]
        assert f["level"] == 0.9 and f["lower"] < f["predicted"] < f["upper"]


def test_backtests_predict_the_largest_sizes_from_the_smaller():
    pts = ladder()
    bt = backtest(pts, COLS)
    primary = bt[bt["primary"]]  # the farthest: the largest size from the smallest cut
    assert set(primary["params"]) == {8e8} and (primary["cut"] == 2e8).all()
    assert set(bt["cut"]) == {2e8, 4e8}
    assert set(bt["method"]) == {"paper_two_step", "two_step", "two_step_bounded", "single_step", "intermediate_chain"}
    assert (bt["decades"] > 0).all()
    fin = finals(pts).set_index("run")
    assert np.allclose(bt["actual"], fin.loc[bt["run"], COLS.acc].to_numpy())


def test_a_missing_metric_is_one_line_naming_the_column():
    pts = ladder().drop(columns=[COLS.loss])
    with pytest.raises(InputError, match="task_bpb/synthetic") as exc:
        forecast_task(pts, COLS, 4e9, 1e12, n_resamples=0)
    assert "\n" not in str(exc.value)


def test_every_law_is_registered_once_and_rebuilds():
    assert law_names("point") == ("chinchilla", "compute", "isoflop")
    assert {"task_chain", "task_single_step", "task_sigmoid", "task_sigmoid_bounded"} <= set(law_names("task"))
    assert len(REGISTRY) == len({e.name for e in REGISTRY.values()})
    for entry in REGISTRY.values():
        assert entry.min_points >= 1 and ":" in entry.fit and ":" in entry.build
    law = build_law("task_sigmoid_bounded", {"k": 9.0, "L0": 0.95}, {"chance": 0.25})
    assert float(law.predict(0.95)) == pytest.approx(0.625)
    with pytest.raises(ValueError, match="unknown law 'nope'"):
        law_entry("nope")
    # what the analysis and the bootstrap used to match by name, they now read here
    assert in_compute("compute") and in_compute("compute_domains") and not in_compute("chinchilla_tied")
    assert law_entry("compute").pin_E and not law_entry("chinchilla").pin_E
    assert resample_function("isoflop") is None and resample_function("chinchilla").__name__ == "resample_chinchilla"
    assert law_entry("compute").units == "budgets" and law_entry("chinchilla").units == "configurations"


def test_olmo_columns_weight_mmlu_and_name_a_missing_column():
    assert sum(MMLU_WEIGHTS.values()) == pytest.approx(1.0)
    row = {f"eval/downstream_bpb/mmlu_{s}_test_rc_5shot_bpb": 1.0 + i for i, s in enumerate(MMLU_WEIGHTS)}
    row |= {f"eval/downstream/mmlu_{s}_test_rc_5shot_len_norm": 0.3 for s in MMLU_WEIGHTS}
    row["eval/c4_en-validation/CrossEntropyLoss"] = 2.5
    out = olmo_metrics(pd.DataFrame([row]), "x.csv", ("mmlu",))
    assert out["task_bpb/mmlu"].iloc[0] == pytest.approx(sum((1.0 + i) * w for i, w in enumerate(MMLU_WEIGHTS.values())))
    assert out["task_acc/mmlu"].iloc[0] == pytest.approx(0.3) and out["loss"].iloc[0] == 2.5
    with pytest.raises(InputError, match="x.csv: no column 'eval/downstream_bpb/hellaswag_val_rc_5shot_bpb'"):
        olmo_metrics(pd.DataFrame([row]), "x.csv", ("mmlu", "hellaswag"))
    assert len(OLMO_TASKS) == 8


def test_olmo_s_3b_runs_load_as_a_development_target_with_the_paper_s_n():
    """The 3B runs no fit reads (fits.olmo_tasks.DEV_RUNS) carry OLMo-ladder's N, absent from final.json,
    and each is trained to its multiple of 20 tokens per parameter."""
    from fits.olmo_tasks import DEV_RUNS, PARAMS_BEYOND_FINAL_JSON, olmo_checkpoints

    dev = olmo_checkpoints(DEV_RUNS)
    fin = finals(dev).set_index("run")
    assert list(fin.index) == list(DEV_RUNS)
    assert (fin["params"] == PARAMS_BEYOND_FINAL_JSON["3B"]).all()
    for run, row in fin.iterrows():
        k = float(run.split("-")[1].rstrip("xC"))
        assert row["tokens"] == pytest.approx(20 * k * row["params"], rel=0.05)
        assert 0.25 < row["task_acc/arc_easy"] < 1.0
