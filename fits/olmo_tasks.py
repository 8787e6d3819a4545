"""OLMo's ladder task metrics (Bhagia et al. 2024) as a checkpoints table for fits.tasks.

OLMo's exported CSVs name a task's loss `eval/downstream_bpb/<task>_<split>_rc_5shot_bpb` and its
accuracy `eval/downstream/<task>_<split>_rc_5shot_len_norm`. The paper's eight tasks take the test
split where OLMo has one (ARC, OpenBookQA, MMLU) and the validation split otherwise; MMLU is its four
test-split subsets weighted by item count. They become `task_bpb/<task>` and `task_acc/<task>`, the
names a ladder's own evaluations use, and `loss` (C4's cross-entropy) the intermediate.
"""

from __future__ import annotations

import pandas as pd

from fits.io import InputError
from fits.tasks_forecast import TaskColumns

OLMO_C4 = "eval/c4_en-validation/CrossEntropyLoss"
MMLU_WEIGHTS = {"stem": 0.215, "humanities": 0.335, "social_sciences": 0.219, "other": 0.231}
# task -> (split of OLMo's column, chance accuracy = 1 / choices)
OLMO_TASKS = {
    "mmlu": ("test", 0.25), "hellaswag": ("val", 0.25), "arc_challenge": ("test", 0.25),
    "arc_easy": ("test", 0.25), "piqa": ("val", 0.5), "csqa": ("val", 0.2), "socialiqa": ("val", 1 / 3),
    "openbookqa": ("test", 0.25),
}
PAPER_RUNS = tuple(f"{s}-{k}xC" for s in ("190M", "370M", "760M", "1B") for k in (1, 2, 5, 10))
# OLMo's 3B runs: no fit or choice reads them; they are the development target a task rule is chosen on
# (experiments/olmo_task_rules.py) before the 7B and 13B are scored.
DEV_RUNS = tuple(f"3B-{k}xC" for k in (1, 2, 5, 10))
# final.json gives no 3B: its N from OLMo-ladder's src/scaling/utils.py MODEL_PARAMS, as the paper counts N
PARAMS_BEYOND_FINAL_JSON = {"3B": 3169537280.0}


def loss_column(task: str) -> str:
    return f"task_bpb/{task}"


def acc_column(task: str) -> str:
    return f"task_acc/{task}"


def task_columns(task: str, chance: float, intermediate: str | None = "loss") -> TaskColumns:
    """Where a task's metrics are in a checkpoints table made by olmo_metrics (or a ladder's evals)."""
    return TaskColumns(task=task, loss=loss_column(task), acc=acc_column(task), chance=chance,
                       intermediate=intermediate)


def _olmo_names(task: str) -> dict[str, list[tuple[str, str, float]]]:
    split = OLMO_TASKS[task][0]
    parts = [(f"mmlu_{s}", w) for s, w in MMLU_WEIGHTS.items()] if task == "mmlu" else [(task, 1.0)]
    return {"bpb": [(f"eval/downstream_bpb/{p}_{split}_rc_5shot_bpb", "bpb", w) for p, w in parts],
            "acc": [(f"eval/downstream/{p}_{split}_rc_5shot_len_norm", "acc", w) for p, w in parts]}


def olmo_metrics(frame: pd.DataFrame, where: str, tasks=tuple(OLMO_TASKS)) -> pd.DataFrame:
    """OLMo's columns for `tasks` as task_bpb/<task>, task_acc/<task> and loss (C4); a missing
    column is one InputError naming it and `where` (the file)."""
    out = pd.DataFrame(index=frame.index)
    needed = [OLMO_C4] + [c for t in tasks for kind in _olmo_names(t).values() for c, _, _ in kind]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise InputError(f"{where}: no column {missing[0]!r} (OLMo's name for a task metric"
                         f"{'' if len(missing) == 1 else f'; {len(missing) - 1} more missing'}); "
                         "export the run's evaluations with every task, or list fewer tasks")
    for t in tasks:
        names = _olmo_names(t)
        out[loss_column(t)] = sum(w * frame[c].astype(float) for c, _, w in names["bpb"])
        out[acc_column(t)] = sum(w * frame[c].astype(float) for c, _, w in names["acc"])
    out["loss"] = frame[OLMO_C4].astype(float)
    return out


def olmo_checkpoints(runs=PAPER_RUNS) -> pd.DataFrame:
    """The bundled ladder runs' every evaluation: run, params, tokens, and olmo_metrics' columns."""
    from fits.reference import data_dir, olmo_final_json

    meta = olmo_final_json()
    n_of = {"190M": "190M", "370M": "370M", "760M": "760M", "1B": "1.3B", "3B": "3B"}
    frames = []
    for run in runs:
        path = data_dir() / "olmo_ladder" / f"{run}.csv"
        raw = pd.read_csv(path)
        part = olmo_metrics(raw, str(path))
        part.insert(0, "tokens", raw["throughput/total_tokens"].astype(float))
        size = n_of[run.split("-")[0]]
        part.insert(0, "params", float(meta[size]["n"]) if size in meta else PARAMS_BEYOND_FINAL_JSON[size])
        part.insert(0, "run", run)
        frames.append(part)
    return pd.concat(frames, ignore_index=True)


def olmo_targets() -> dict[str, dict]:
    """The paper's two targets, scored as it scores them: 7B by its anneal row, 13B by the mean of its
    last 5 evaluations. Each: params, tokens and its metrics (a Series of olmo_metrics' columns)."""
    from fits.reference import data_dir, olmo_final_json

    meta, d = olmo_final_json(), data_dir() / "olmo_ladder"
    anneal = pd.read_csv(d / "peteish7_eval_anneal.csv")
    last = pd.read_csv(d / "peteish13_eval_final.csv").sort_values("_step").tail(5)
    return {
        "7B": {"params": float(meta["7B-4T"]["n"]), "tokens": float(anneal["throughput/total_tokens"].iloc[0]),
               "metrics": olmo_metrics(anneal, "peteish7_eval_anneal.csv").iloc[0]},
        "13B": {"params": float(meta["13B-5T"]["n"]),
                "tokens": float((last["_step"] * last["batch_size_in_tokens"]).iloc[-1]),
                "metrics": olmo_metrics(last, "peteish13_eval_final.csv").mean()},
    }
