"""Every existing ladder keeps its step directories: the step hashes of the ladders in experiments/,
computed before steps declared a kind (main 2246bca) and pinned here. A move of code must leave them
as they are; a change that fails here moves finished runs to new directories (retraining them).

The hashed ``inputs`` (package versions, data digests) are set to one value first: they change with
an upgrade, which is meant to move a run, and are not what this test guards. The kinds the hashes
name steps by are frozen in ladder/dag/kinds.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ladder.dag.stages import build_steps
from ladder.executor import Executor
from ladder.spec import load_spec

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

PINNED = {
    "smoke": {
        "fit": "e277f0b4440a",
        "gate": "8d2fcc18b1ee",
        "hero": "dcf7df03211e",
        "predict": "3b5d3a3026f8",
        "report": "4b77817a9a5a",
        "rung_1": "0250c66d12ff",
        "rung_2": "3c50fb1fe6d9",
        "rung_3": "38b1d32e46b3",
        "rung_4": "ba3f5affaad8",
    },
    "tiny": {
        "fit": "4d41eafadcdc",
        "gate": "5ce2162732b6",
        "hero": "222f63d7c566",
        "predict": "5b49eb3c401e",
        "report": "f6460afadf17",
        "rung_1": "61baf2abcddd",
        "rung_1_r1": "93314c1502a9",
        "rung_2": "5f45a9055178",
        "rung_2_r1": "e595c69c59f2",
        "rung_3": "22ab5e0566d9",
        "rung_3_r1": "8846edd32860",
        "rung_4": "43fb35931582",
        "rung_4_r1": "e63ce9291fc3",
        "rung_5": "7d11664b7e79",
        "rung_5_r1": "d60724e4f18e",
    },
    "smoke_isoflop": {
        "fit": "0b07d78be6d2",
        "gate": "ba6699eec7ce",
        "hero": "21322ce92155",
        "iso1-d16": "a3496bc7d08d",
        "iso1-d24": "f24a459bcec6",
        "iso1-d32": "fc2399ffdd44",
        "iso1-d8": "d36f9defd7c2",
        "iso2-d16": "8b44a9fe0d3f",
        "iso2-d24": "a754d4a9fd33",
        "iso2-d8": "3fbeafc8ab16",
        "isoflop": "834880d6a73c",
        "predict": "6afc47d01772",
        "report": "3cb69bafe4a5",
        "rung_1": "2427ace00f2e",
        "rung_2": "4f5c481dbbfd",
        "rung_3": "88b2a31b4329",
        "rung_4": "0418dce5f805",
    },
    "marin_moe_535b": {
        "d1024": "870f0b43bf5f",
        "d1536": "509b522eda2a",
        "d2048": "fb486b1ce050",
        "d768": "abba4e997cdd",
        "fit": "6e4dcb8b5ab6",
        "gate": "b102d5df825a",
        "predict": "9cb4d1120b47",
        "report": "0ac76dc95c38",
    },
}


def _steps(name: str, root: Path) -> tuple[str, list]:
    spec = dataclasses.replace(load_spec(EXPERIMENTS / f"{name}.py"), root=str(root))
    steps = [dataclasses.replace(s, config={**s.config, "inputs": "pinned"}) if "inputs" in s.config else s
             for s in build_steps(spec)]
    return spec.name, steps


def _hashes(ladder: str, steps: list, root: Path) -> dict[str, str]:
    return {n: node.hash[:12] for n, node in Executor(str(root), ladder).graph(steps).items()}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_step_hashes_of_the_experiments_are_pinned(name, tmp_path):
    ladder, steps = _steps(name, tmp_path)
    assert _hashes(ladder, steps, tmp_path) == PINNED[name]


def test_a_step_function_can_move_without_moving_the_hash(tmp_path):
    ladder, steps = _steps("smoke_isoflop", tmp_path)
    moved = [dataclasses.replace(s, fn="elsewhere.module:renamed") for s in steps]
    assert all(s.kind for s in steps)
    assert _hashes(ladder, moved, tmp_path) == _hashes(ladder, steps, tmp_path)
