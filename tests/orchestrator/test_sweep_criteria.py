"""String-stability criteria of a sweep: with a sinusoid leader, speed and acceleration give the verdict of the
linear theory (Ploeg's CACC with a 0.1 s delay: the smallest stable time gap is about 0.55 s), |Gamma(jw)| is
measured against the closed form, answers at the edge of the grid are flagged, and the page says which criterion
and why the profile does or does not excite the chain."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from orchestrator.batch.aggregate import min_stable
from orchestrator.batch.criteria import Criterion, excitation_note, parse_criterion
from orchestrator.batch.sweep import sweep
from tests.controllers.harness import gamma_ploeg

from .test_platooning_message import SCENARIO, W_PEAK
from .test_resolved import REPO

pytestmark = pytest.mark.slow  # a sweep over gains to the smallest stable gap

GAPS = [0.5, 0.6, 0.9]


@pytest.fixture(scope="module")
def ploeg_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("criteria")
    return sweep(SCENARIO, [("controller.time_gap_s", GAPS)], out, criterion=parse_criterion("speed"), jobs=2), out


def _verdicts(result, criterion: str) -> dict:
    (group,) = min_stable(result["points"], "controller.time_gap_s", 0.0, parse_criterion(criterion))["groups"]
    return group


@pytest.mark.parametrize("criterion", ["speed:l2", "acceleration:l2"])
def test_speed_and_acceleration_give_the_theorys_smallest_stable_gap(ploeg_sweep, criterion):
    theory_stable = [h for h in GAPS if gamma_ploeg(np.linspace(0.05, 5, 2000), h, 0.2, 0.7, 0.1, 0.1).max() <= 1]
    assert theory_stable == [0.6, 0.9]
    group = _verdicts(ploeg_sweep[0], criterion)
    assert group["value"] == 0.6 and group["consistent"] and group["unstable"] == [0.5]
    assert group["edge"] is None


def test_the_sweep_reports_its_criterion_and_why_the_leader_excites_the_chain(ploeg_sweep):
    result, out = ploeg_sweep
    assert result["criterion"]["metric"] == "l2_ratio_speed_deviation"
    assert "sinusoid" in result["criterion"]["excitation"]
    assert result["min_stable"]["criterion"].startswith("worst l2_ratio_speed_deviation (L2 ratio of speed)")
    page = (out / "sweep.html").read_text()
    assert "L2 ratio of speed" in page and "The leader&#x27;s speed is a sinusoid" in page
    saved = json.loads((out / "sweep.json").read_text())
    assert saved["points"][0]["stability"]["criterion"] == "speed:l2"


def test_gamma_is_measured_at_the_leaders_frequency_within_1_5_percent_of_the_closed_form(ploeg_sweep):
    for point in ploeg_sweep[0]["points"]:
        h = point["params"]["controller.time_gap_s"]
        theory = gamma_ploeg(np.array([W_PEAK]), h, 0.2, 0.7, 0.1, 0.1)[0]
        assert point["stability"]["ratios"]["gamma_speed"] == pytest.approx(theory, rel=0.015)
    group = _verdicts(ploeg_sweep[0], "gamma")
    assert 0.5 in group["unstable"] and 0.9 in group["stable"]


def test_answers_at_the_edge_of_the_grid_are_flagged():
    def point(h: float, ratio: float) -> dict:
        return {"params": {"h": h}, "status": "ok", "stability": {"l2_ratio_spacing_error": ratio, "collisions": 0}}

    (low,) = min_stable([point(0.2, 0.9), point(0.4, 0.8)], "h")["groups"]
    assert low["value"] == 0.2 and "extend the grid below" in low["edge"]
    (high,) = min_stable([point(0.2, 1.2), point(0.4, 1.1)], "h")["groups"]
    assert high["value"] is None and "extend the grid above 0.4" in high["edge"]


def test_a_leader_at_constant_speed_is_said_not_to_excite_the_longitudinal_chain():
    note = excitation_note({"profile": "s_curve", "params": {"speed_mps": 1.0}}, Criterion("spacing_error", "l2"))
    assert "does not excite the longitudinal dynamics" in note
    assert "no point can be judged" in excitation_note({"profile": "s_curve"}, parse_criterion("gamma"))


def test_criteria_parse_and_a_bad_one_is_exit_2_listing_the_allowed():
    assert parse_criterion("speed").metric == "l2_ratio_speed_deviation"
    assert parse_criterion("acceleration:linf").metric == "linf_ratio_acceleration"
    assert parse_criterion("spacing_error").metric == "l2_ratio_spacing_error"
    assert parse_criterion("gamma").metric == "gamma_speed"
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "sweep", str(REPO / "scenarios" / "platoon.yaml"),
                           "--param", "controller.time_gap_s=0.5,1.0", "--criterion", "jerk:l2"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "unknown criterion 'jerk:l2'" in proc.stderr and "speed:linf" in proc.stderr
    assert "Traceback" not in proc.stderr
