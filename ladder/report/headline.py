"""The last lines `ladder report` prints (and so `make demo`): where the hero landed against its band and
where the report is, or, where the gate blocked the hero, exactly what to do next and how often the
gate blocks this ladder.

How often comes from the ladder's record of draws, a CSV beside its spec (experiments/tiny.py:
experiments/tiny_draws.csv, one row a draw, its `gate` column "passed" or "blocked"), never from a
figure written here: the rate belongs to the ladder's design and is measured on its draws.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pandas as pd

DRAWS_SUFFIX = "_draws.csv"
NOT_STARTED = (None, "BLOCKED", "DEP_FAILED")  # the hero step's status where the gate held it back (ladder.executor)


def draws_path(spec_path: str) -> Path:
    """The ladder's record of draws: <spec stem>_draws.csv beside the spec."""
    path = Path(spec_path)
    return path.with_name(path.stem + DRAWS_SUFFIX)


def recorded_blocks(spec_path: str) -> tuple[int, int] | None:
    """(draws the gate blocked, draws recorded) from the ladder's record; None without a record or a draw in it."""
    from fits.errors import InputError

    path = draws_path(spec_path)
    if not path.is_file():
        return None
    try:
        draws = pd.read_csv(path, comment="#")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a CSV of draws ({str(exc).splitlines()[0][:120]}); fix it or remove it") from exc
    if "gate" not in draws:
        raise InputError(f"{path}: no `gate` column; give each draw's gate as passed or blocked")
    verdict = draws["gate"].astype(str).str.strip().str.lower()
    odd = sorted(set(verdict) - {"passed", "blocked"})
    if odd:
        raise InputError(f"{path}: gate {odd[0]!r} in column `gate`; each draw's gate is passed or blocked")
    return (int((verdict == "blocked").sum()), int(len(draws))) if len(draws) else None


def final_lines(rep: dict[str, Any], html_path: str | None, spec, spec_path: str, overrides: tuple[str, ...] = ()) -> list[str]:
    """One line for a hero that ran (or has not yet), two for a blocked one; the report's path alone without a hero."""
    where = f"report: {html_path}" if html_path else "report: not written"
    hero = rep.get("hero")
    if not hero:
        return [where]
    gate = rep.get("gate") or {}
    blocked = bool(gate) and not gate.get("passed") and not gate.get("overridden") and not gate.get("advisory")
    if blocked and hero.get("status") in NOT_STARTED:
        return _blocked_lines(rep, spec, spec_path, overrides) + [where]
    return [f"{_landed(hero, gate)}; {where}"]


def _landed(hero: dict[str, Any], gate: dict[str, Any]) -> str:
    band = f"{hero['predicted_final_loss']:.4f} [{hero['lower']:.4f}, {hero['upper']:.4f}]"
    level = f"{hero['level']:.0%}" if hero.get("level") else "its"
    forced = " (trained past a BLOCKED gate with --force)" if gate.get("overridden") else ""
    actual = hero.get("actual_final_loss")
    if hero.get("partial"):  # a curve recorded part of the way: no final to score, its points so far are
        rec = hero.get("recorded") or {}
        so_far = (f", its recorded points {rec['inside_band']:.0%} inside it (mean |error| {rec['mean_abs_rel_error']:.2%})"
                  if rec.get("inside_band") is not None else "")
        return (f"hero: recorded to {float(hero.get('completed_frac') or 0):.1%} of its run, no final yet{forced}; "
                f"forecast {band} ({level} band){so_far}")
    if actual is None or hero.get("relative_error") is None:
        return f"hero: {str(hero.get('status') or 'not run').lower()}{forced}, forecast {band} ({level} band)"
    side = "inside" if hero.get("inside_interval") else "OUTSIDE"
    return f"hero: {actual:.4f} against {band}: {side} the {level} band, error {hero['relative_error']:+.2%}{forced}"


def _command(verb: str, spec_path: str, spec, overrides: tuple[str, ...], *more: str) -> str:
    sets = [a for o in overrides for a in ("--set", o)]
    return shlex.join(["ladder", verb, spec_path, "--root", str(spec.root), *sets, *more])


def _blocked_lines(rep: dict[str, Any], spec, spec_path: str, overrides: tuple[str, ...]) -> list[str]:
    force = _command("submit", spec_path, spec, overrides, "--force")
    outlier = (rep.get("fit") or {}).get("replica_outlier") or {}
    level = float(((rep.get("gate") or {}).get("thresholds") or {}).get("replica_outlier_level") or 0.0)
    odd = outlier.get("odd_run") if float(outlier.get("p_family", 1.0)) < level else None  # the outlier blocked
    names = [r.name for r in spec.rungs]
    if odd in names:
        # the same seed would train the same run again: a seed no run of the ladder has
        seed = max(int(r.seed) for r in spec.rungs) + 1
        reseed = f"rungs[{names.index(odd)}].seed={seed}"
        first = (f"hero: not trained, the gate BLOCKED it (reasons above). Next: train {odd} again on another seed, "
                 f"`{_command('submit', spec_path, spec, (*overrides, reseed))}` (report with the same --set), "
                 f"or train the hero anyway: `{force}`")
    else:
        first = (f"hero: not trained, the gate BLOCKED it (reasons above). Next: train the hero anyway, `{force}` "
                 "(the report then scores its forecast as it would any other)")
    counts = recorded_blocks(spec_path)
    record = draws_path(spec_path)
    if counts is None:
        how_often = f"How often the gate blocks this ladder: no draws recorded yet ({record})"
    else:
        blocked, total = counts
        how_often = (f"How often: the gate blocked {blocked} of {total} recorded draws of this ladder "
                     f"({blocked / total:.0%}; {record})")
    return [first, how_often]
