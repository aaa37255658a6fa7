"""The resolved scenario says every value the run used: running it again gives the same digest, for every shipped
scenario and for a compare variant; per-robot and per-platoon controller blocks are written out in full."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from orchestrator.cli.main import main
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name for p in (REPO / "scenarios").glob("*.yaml"))
SHORT = ["duration_s=3", "outputs.plots=false", "outputs.report=false", "maneuvers=[]"]
"""A short run of any shipped scenario (its maneuver requests, later than 3 s, would be errors: at or after the end;
tests/orchestrator/test_maneuvers.py reruns a resolved scenario with maneuvers)."""


@pytest.mark.parametrize("name", SHIPPED)
def test_running_the_resolved_scenario_reproduces_the_run(tmp_path, name):
    first = run_scenario(load_scenario(REPO / "scenarios" / name, SHORT), tmp_path / "first")
    resolved = tmp_path / "first" / "scenario.resolved.yaml"
    again = run_scenario(load_scenario(resolved), tmp_path / "again")
    assert again.run_info["digest"] == first.run_info["digest"]
    # a fixed point: resolving the resolved file changes nothing
    assert (tmp_path / "again" / "scenario.resolved.yaml").read_text() == resolved.read_text()


def test_overrides_and_platoon_blocks_are_written_in_full(tmp_path):
    run_scenario(load_scenario(REPO / "scenarios" / "two_platoons.yaml", [
        *SHORT, "platoons[1].overrides={outer_3: {controller: {time_gap_s: 0.8}}}"]), tmp_path)
    data = yaml.safe_load((tmp_path / "scenario.resolved.yaml").read_text())
    inner = data["platoons"][0]["controller"]
    assert inner["type"] == "acc" and inner["lambda_gain"] == 0.1 and inner["max_range_m"] == 250.0  # defaults
    override = data["platoons"][1]["overrides"]["outer_3"]["controller"]
    assert override["time_gap_s"] == 0.8 and override["k1"] == 1.0 and override["period_s"] == 0.02
    assert data["channel"]["generation"]["t_gen_cam_max_s"] == 1.0  # the ITS-G5 parameters, defaults included


@pytest.mark.slow
def test_a_compare_variant_reruns_from_its_resolved_scenario(tmp_path):
    out = tmp_path / "cmp"
    assert main(["compare", str(REPO / "scenarios" / "platoon.yaml"), "--channels", "ideal,itsg5", "--out",
                 str(out), "--jobs", "1", "--quiet", *(f"--set={s}" for s in SHORT)]) == 0
    variant = out / "itsg5"
    channel = yaml.safe_load((variant / "scenario.resolved.yaml").read_text())["channel"]
    assert channel["type"] == "itsg5" and "generation" in channel and "dcc" in json.dumps(channel)
    again = run_scenario(load_scenario(variant / "scenario.resolved.yaml"), tmp_path / "again")
    assert again.run_info["digest"] == json.loads((variant / "run.json").read_text())["digest"]


def test_an_override_whose_law_has_an_infinite_default_reads_back(tmp_path):
    """A per-robot override is written with its merged controller block; the lateral law's default curvature limit is
    infinite (no clamp), which an override's free-form mapping cannot hold: it is left out, and the default it
    stands for comes back when the file is read, so the resolved scenario reruns with the same digest."""
    text = """
version: 1
name: inf_default
duration_s: 2.0
controller: {type: ela_cacc, time_gap_s: 0.6}
platoons:
  - name: p1
    count: 3
    template: {preset: passenger_car}
    overrides: {p1_1: {controller: {time_gap_s: 1.2}}}
channel: {type: ideal}
outputs: {plots: false, report: false}
"""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    first = run_scenario(load_scenario(path), tmp_path / "first")
    resolved = tmp_path / "first" / "scenario.resolved.yaml"
    assert "max_curvature_per_m: null" not in resolved.read_text()
    override = yaml.safe_load(resolved.read_text())["platoons"][0]["overrides"]["p1_1"]["controller"]
    assert override["time_gap_s"] == 1.2 and "max_curvature_per_m" not in override["lateral"]
    again = run_scenario(load_scenario(resolved), tmp_path / "again")
    assert again.run_info["digest"] == first.run_info["digest"]
