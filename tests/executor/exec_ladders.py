"""Ladders of test steps and an execution counter, shared by the executor tests and driver scripts."""

from __future__ import annotations

import os

import exec_stepfns

from ladder.executor import Dep, Step


def ladder_steps(x1: float = 1.0, fit_notes: str = "", gate_pass: bool = False) -> list[Step]:
    """Six steps shaped like a real ladder: two rungs -> fit -> gate -> hero (order) -> report."""
    w = exec_stepfns.work
    return [
        Step("rung_1", w, {"x": x1, "model": {"d_model": 16}}, flops=1e12),
        Step("rung_2", w, {"x": 2.0, "model": {"d_model": 32}}, flops=4e12),
        Step("fit", w, {"x": 0.0, "law": "compute", "notes": fit_notes}, deps=(Dep("rung_1"), Dep("rung_2"))),
        Step("gate", exec_stepfns.gate, {"pass": gate_pass}, deps=(Dep("fit"),)),
        Step("hero", w, {"x": 100.0}, deps=(Dep("gate", kind="order"),), flops=1e15),
        Step("report", w, {"x": 0.0}, deps=(Dep("hero", required=False), Dep("fit"))),
    ]


def count_runs(log_path) -> dict[str, int]:
    counts: dict[str, int] = {}
    if os.path.exists(log_path):
        with open(log_path) as f:
            for line in f:
                name = line.split()[0]
                counts[name] = counts.get(name, 0) + 1
    return counts
