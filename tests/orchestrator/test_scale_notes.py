"""Parameters far off the vehicles' scale are noted by validate (never refused): a car's PATH gap on 1:10 robots,
a 1 m pure-pursuit look-ahead on cars at 25 m/s, a sinusoid larger than the speed it modulates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLATOON = REPO / "scenarios" / "platoon.yaml"


def validate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", "validate", *args], cwd=REPO,
                          capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "300"})


@pytest.mark.slow
def test_a_car_gap_on_robots_is_noted():
    proc = validate(str(PLATOON), "--set", "controller.type=path_cacc")
    assert proc.returncode == 0
    assert "note: path_cacc robot1 .. robot3 (3 robots): a standstill gap of 5 m is 10 vehicle lengths" in proc.stdout
    # the same law with a robot-sized gap: no note
    proc = validate(str(PLATOON), "--set", "controller={type: path_cacc, spacing_m: 0.5}")
    assert "note:" not in proc.stdout


@pytest.mark.slow
def test_a_short_lookahead_on_cars_at_motorway_speed_is_noted():
    cars = ["--set", "vehicles.template={preset: g35_sedan, model: kinematic}", "--set", "leader.profile=constant",
            "--set", "leader.params={speed_mps: 25.0}",
            "--set", "controller={type: ploeg_cacc, lateral: {lookahead_m: 1.0}}"]
    proc = validate(str(PLATOON), *cars)
    assert proc.returncode == 0
    assert "a pure-pursuit look-ahead of 1 m at 25 m/s is 0.04 s of travel" in proc.stdout
    proc = validate(str(PLATOON), *cars[:-1], "--set",
                    "controller={type: ploeg_cacc, lateral: {lookahead_m: 5.0, lookahead_time_s: 0.8}}")
    assert "look-ahead" not in proc.stdout


@pytest.mark.slow
def test_an_excitation_larger_than_the_speed_is_noted():
    proc = validate(str(PLATOON), "--set", "leader.profile=sinusoid", "--set", "leader.params={speed_mps: 1.0}")
    assert "the sinusoid amplitude 2.78 m/s exceeds its speed 1 m/s" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "scenarios").glob("*.yaml")))
def test_the_shipped_scenarios_are_in_scale(name):
    proc = validate(str(REPO / "scenarios" / name))
    assert proc.returncode == 0 and "note:" not in proc.stdout, proc.stdout
