"""The ``misbehaviour`` metric on a hand-made verdict trace: a jammer (it forges no message) is left out of the
per-attack table, the other attacks keep their index in the scenario's list, and the figures are the counts."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from orchestrator.metrics.misbehaviour import misbehaviour
from orchestrator.scenario.attacks_block import AttackEntry


def test_a_jammer_is_left_out_of_the_attack_table() -> None:
    # 6 honest messages (one flagged), 4 of attack label 2 (the constant offset; 3 flagged, the first at 5.2 s)
    attack = np.array([0, 0, 0, 0, 0, 0, 2, 2, 2, 2])
    verdict = np.array(["plausible"] * 5 + ["misbehaving"] + ["plausible"] + ["misbehaving"] * 3, dtype=object)
    t_ns = np.array([1, 2, 3, 4, 5, 6, 5.1, 5.2, 5.3, 5.4]) * 1e9
    trace = {"attack": attack, "verdict": verdict, "t_ns": t_ns.astype(np.int64), "checks": np.zeros(10, np.int64)}
    scenario = SimpleNamespace(attacks=[
        AttackEntry(type="jamming_constant", params={"x_m": 0.0, "y_m": 10.0}, from_s=1.0),
        AttackEntry(robot="car1", type="constant_offset", params={"dx_m": 5.0}, from_s=5.0),
    ])
    run = SimpleNamespace(trace=lambda name: trace if name == "misbehaviour" else None, scenario=scenario)
    out = misbehaviour.compute(run, {})
    assert out is not None
    assert [(a["attack"], a["type"], a["robot"]) for a in out["attacks"]] == [(1, "constant_offset", "car1")]
    entry = out["attacks"][0]
    assert (entry["messages"], entry["detected"]) == (4, 3)
    assert entry["precision"] == pytest.approx(3 / 4) and entry["recall"] == pytest.approx(3 / 4)
    assert entry["time_to_detection_s"] == pytest.approx(0.2)
    assert (out["honest_messages"], out["false_positives"]) == (6, 1)
