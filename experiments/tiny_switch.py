"""The default ladder with its hero's data mix switched 30% into its run, and that switch replayed on
every rung at the same fraction (the variant `replay`): issue 58's mid-run change, forecast past the
switch with the effect the replayed rungs measure instead of a wider band.

A is this file: the ladder named tiny, so its rungs are tiny's own (the same step hashes: finished
rungs are reused), and a hero that trains the switch (its own step hash). B is `--variant replay`,
the ladder tiny+replay, every rung switching at the same fraction (its hero is predicted, not trained). The switch moves the
training mixture from tiny's code 0.5 / web Bible 0.25 / KJV 0.25 to code 0.8 / 0.1 / 0.1; the evals
keep tiny's mixture, so every run is scored alike. Which way the switch moves the eval loss, and by
how much at each size, is what the rungs measure:

    ladder submit experiments/tiny_switch.py --root runs
    ladder submit experiments/tiny_switch.py --variant replay --root runs
    ladder compare experiments/tiny_switch.py experiments/tiny_switch.py --variant-b replay --root runs --json
"""

import dataclasses
import runpy
from pathlib import Path

from ladder.spec import RunChange, resolve

TINY = runpy.run_path(str(Path(__file__).with_name("tiny.py")))["LADDER"]
MIX = {"code": 0.8, "bible_web": 0.1, "bible_kjv": 0.1}
HERO_STEPS = resolve(TINY).hero.steps  # the hero's batch is a rule of its compute: its steps once resolved
SWITCH_STEP = round(0.3 * HERO_STEPS)

LADDER = dataclasses.replace(
    TINY,
    hero=dataclasses.replace(TINY.hero, changes=(RunChange(SWITCH_STEP, "data mix", "code 0.5 -> 0.8", weights=MIX),)),
    # B needs no hero of its own: its rungs measure the switch's effect, which carries A's hero past it
    variants={"replay": {"data.switch_at": SWITCH_STEP / HERO_STEPS, "data.switch_weights": MIX, "train_hero": False}},
    description="default CPU ladder, its hero's data mix switched at 30%",
)
