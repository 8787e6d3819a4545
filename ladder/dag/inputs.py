"""What a step's numbers depend on besides its config: the package versions (and data digests)
hashed into it as config["inputs"], and the source whose change leaves a finished run stale
(Step.code, prefixes in the checkout; see ladder.executor.stale)."""

from __future__ import annotations

from typing import Any

# a hero's live snapshots (its callback) follow `ladder follow`'s rule: those modules are the hero's code too
TRAIN_CODE = ("ladder/trainers/builtin/", "ladder/spec/", "ladder/dag/step_fns.py", "ladder/analysis/forecast.py",
              "ladder/analysis/trained_live.py", "ladder/analysis/follow_forecast.py", "ladder/analysis/follow_bands.py")
# a run of another trainer: the contract's side of ladder (its own code is hashed by its declared files' digests)
FOREIGN_TRAIN_CODE = ("ladder/trainers/contract.py", "ladder/trainers/writer.py", "ladder/trainers/outcome.py",
                      "ladder/trainers/follow.py", "ladder/trainers/command_run.py", "ladder/trainers/function_run.py",
                      *TRAIN_CODE[1:])
ANALYSIS_PACKAGES = ("numpy", "scipy", "pandas")
ANALYSIS_CODE = ("ladder/analysis", "fits/", "ladder/spec/", "ladder/dag/step_fns.py")
REPORT_CODE = ("ladder/report/", "ladder/outputs/", "ladder/analysis", "fits/", "ladder/dag/step_fns.py")


def step_inputs(packages: tuple[str, ...], data=None) -> dict[str, Any]:
    """The package versions (and data digests) a step's numbers depend on: hashed as config["inputs"]."""
    from ladder.executor.provenance import versions

    out: dict[str, Any] = {"packages": versions(packages)}
    if data is not None:
        from ladder.trainers.builtin.digest import source_digest

        out["data"] = {d.name: source_digest(d.source) for d in data.domains}
    return out
