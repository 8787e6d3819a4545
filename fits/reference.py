"""Loaders for the published reference data the fits are checked against (README in the folder).

The project carries its own copy in fits/reference_data (installed with the package, so a fresh
clone or a plain `pip install` has it); $LADDER_REFERENCE_DATA may point at another copy.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

MULTIPOWER_SCHEDULES = (
    "cosine_24000", "constant_24000", "wsdcon_9",  # the paper fits on these three
    "cosine_72000", "constant_72000", "wsd_20000_24000", "wsdld_20000_24000", "wsdcon_3", "wsdcon_18",
)
MULTIPOWER_FIT_ON = MULTIPOWER_SCHEDULES[:3]
OLMO_C4 = "eval/c4_en-validation/CrossEntropyLoss"
OLMO_RUNG_FILES = {"190M": "190M", "370M": "370M", "760M": "760M", "1.3B": "1B", "3B": "3B"}


BUNDLED = Path(__file__).resolve().parent / "reference_data"


def data_dir() -> Path:
    """The reference-data directory: $LADDER_REFERENCE_DATA when set, else the project's own copy."""
    env = os.environ.get("LADDER_REFERENCE_DATA")
    d = Path(env) if env else BUNDLED
    if not d.is_dir():
        # Only a user's own LADDER_REFERENCE_DATA can be missing: the bundled copy ships with the package.
        raise FileNotFoundError(f"LADDER_REFERENCE_DATA={env} is not a directory: unset it to use the "
                                f"project's copy in {BUNDLED}")
    return d


def _dir() -> Path:
    return data_dir()


def chinchilla_epoch(drop_highest: int = 5) -> pd.DataFrame:
    """Hoffmann et al.'s runs as extracted by Epoch AI, minus the 5 highest losses (240 left),
    as a runs table: params, tokens (= C / 6N), flops, loss."""
    raw = pd.read_csv(_dir() / "chinchilla_epoch" / "svg_extracted_data.csv")
    raw = raw.sort_values("loss", kind="stable").iloc[: len(raw) - drop_highest]
    N = raw["Model Size"].to_numpy(float)
    C = raw["Training FLOP"].to_numpy(float)
    return pd.DataFrame({"params": N, "tokens": C / (6 * N), "flops": C,
                         "loss": raw["loss"].to_numpy(float)}).reset_index(drop=True)


def multipower_curves(size: str) -> dict[str, pd.DataFrame]:
    """The nine schedules' curves (step, lr, loss) of one size: 25M, 100M or 400M."""
    d = _dir() / "multipower_curves" / size
    return {name: pd.read_csv(d / f"{name}.csv") for name in MULTIPOWER_SCHEDULES}


def olmo_final_json() -> dict:
    return json.loads((_dir() / "olmo_ladder" / "final.json").read_text())


def olmo_rungs(sizes=("190M", "370M", "760M", "1.3B"), multipliers=("0.5", "1", "2", "5", "10"),
               column: str = OLMO_C4, tokens_per_param: float = 20.0) -> pd.DataFrame:
    """Final evaluation of each OLMo ladder run as a runs table (params, tokens, flops, loss, size, xC).

    A <k>xC run is trained to k * 20 * n tokens (n from final.json); its last row is the end of
    training. Reruns (*-rerun.csv) are left out: they repeat a configuration.
    """
    meta = olmo_final_json()
    rows = []
    for size in sizes:
        n = float(meta[size]["n"])
        for k in multipliers:
            p = _dir() / "olmo_ladder" / f"{OLMO_RUNG_FILES[size]}-{k}xC.csv"
            if not p.exists():
                continue
            df = pd.read_csv(p, usecols=["_step", column]).dropna()
            D = float(k) * tokens_per_param * n
            rows.append({"size": size, "xC": float(k), "params": n, "tokens": D, "flops": 6 * n * D,
                         "loss": float(df[column].iloc[-1]), "step": int(df["_step"].iloc[-1])})
    return pd.DataFrame(rows)


def olmo_target(column: str = OLMO_C4) -> dict:
    """The 13B target: parameter count, 5T tokens, and its final loss on `column`."""
    meta = olmo_final_json()["13B-5T"]
    df = pd.read_csv(_dir() / "olmo_ladder" / "peteish13_eval_final.csv", usecols=["_step", column]).dropna()
    return {"params": float(meta["n"]), "tokens": 5e12, "loss": float(df[column].iloc[-1]),
            "paper_prediction": 2.344, "paper_rel_err": -0.038}


MARIN_DIR = "marin_moe_535b"
MARIN_HERO_METRIC = "eval_dropless/paloma/macro_loss"


def marin_rungs() -> pd.DataFrame:
    """Marin's four rungs: shape, steps, batch, Marin's compute, last recorded loss, finished."""
    return pd.read_csv(_dir() / MARIN_DIR / "rungs.csv")


def marin_hero_spec() -> pd.Series:
    return pd.read_csv(_dir() / MARIN_DIR / "hero_spec.csv").iloc[0]


def marin_rung_curves() -> pd.DataFrame:
    """Every rung eval point: rung, step, tokens, frac, frac_snap, loss (dropless Paloma macro loss)."""
    return pd.read_csv(_dir() / MARIN_DIR / "rung_curves.csv")


def marin_prediction() -> pd.DataFrame:
    """Marin's own per-5% forecast of the hero (the baseline to reproduce and to beat)."""
    return pd.read_csv(_dir() / MARIN_DIR / "marin_prediction.csv")


def marin_hero_eval() -> pd.DataFrame:
    """The hero's recorded dropless eval points (the actuals: read them only after a forecast is fixed)."""
    frame = pd.read_csv(_dir() / MARIN_DIR / "hero_eval.csv")
    return frame[frame["metric"] == MARIN_HERO_METRIC].reset_index(drop=True)
