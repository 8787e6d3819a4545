"""The compare tests' ladder: the default ladder's recipe, data, fit and variants (experiments/tiny.py) at
the earlier layout of five widths at three layers with two seeds each, so runs pair by seed. Imported from
drawn finals in the tests, never trained."""

import dataclasses
import importlib.util
from pathlib import Path

_path = Path(__file__).resolve().parents[2] / "experiments" / "tiny.py"
_module = importlib.util.spec_from_file_location("compare_default_ladder", _path)
tiny = importlib.util.module_from_spec(_module)
_module.loader.exec_module(tiny)

RUNGS = tuple(tiny.RECIPE.rung(f"rung_{i + 1}" + (f"_r{r}" if r else ""), d, 3, replica=r, n_evals=5, n_checkpoints=5)
              for r in (0, 1) for i, d in enumerate((16, 24, 32, 40, 48)))

LADDER = dataclasses.replace(tiny.LADDER, rungs=RUNGS, hero=tiny.RECIPE.rung("hero", 72, 3, cpus=2.0, n_evals=5),
                             description="the compare tests' two-seed ladder")
