"""Theory vs simulation through the whole orchestrator (not a harness): the extended look-ahead CACC at theory
fidelity (unicycles, ground truth, ideal channel) against the results it is designed for."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.compare import compare, with_fidelity
from orchestrator.metrics import split_by_robot
from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

REPO = Path(__file__).resolve().parents[2]
PLATOON = REPO / "scenarios" / "platoon.yaml"
# the theoretical evaluation's parameters (AuNa, after Bayuwindra et al. 2020): gains 3.5, r = 1 m, h = 0.2 s
THEORY_GAINS = ["controller.k1=3.5", "controller.k2=3.5", "controller.standstill_m=1.0", "controller.time_gap_s=0.2",
                "outputs.plots=false", "outputs.report=false"]


def run_theory(tmp_path: Path, name: str, overrides: list[str]):
    scenario = with_fidelity(parse_scenario(PLATOON.read_text(), overrides=THEORY_GAINS + overrides), "theory")
    result = run_scenario(scenario, tmp_path / name)
    assert result.ok
    trace = pq.read_table(tmp_path / name / "trace" / "vehicles.parquet").to_pydict()
    return result, split_by_robot({k: np.asarray(v) for k, v in trace.items()})


def radii_after(series, t_from: float, center: np.ndarray) -> dict[int, float]:
    out = {}
    for rid, s in series.items():
        late = s.t_ns / 1e9 >= t_from
        out[rid] = float(np.mean(np.hypot(s.cols["x"][late] - center[0], s.cols["y"][late] - center[1])))
    return out


def test_extended_look_ahead_stays_on_the_leaders_circle_and_classic_cuts_d2_over_2r(tmp_path):
    overrides = ["leader.profile=circle", "duration_s=70"]
    _, ext = run_theory(tmp_path, "extended", overrides)
    _, classic = run_theory(tmp_path, "classic", [*overrides, "controller.extended=false"])
    # the leader's circle: v = 1 m/s, w = 0.1 rad/s -> R = 10 m; centre from its settled pose
    lead = ext[1]
    k = np.searchsorted(lead.t_ns, 20_000_000_000)
    R = 10.0
    center = np.array([lead.cols["x"][k] - R * np.sin(lead.cols["yaw"][k]),
                       lead.cols["y"][k] + R * np.cos(lead.cols["yaw"][k])])
    r_ext = radii_after(ext, 40.0, center)
    r_cls = radii_after(classic, 40.0, center)
    assert r_ext[1] == pytest.approx(R, abs=1e-3)
    for rid in (2, 3, 4):
        assert abs(r_ext[rid] - R) < 3e-3, f"extended follower {rid} is off the circle by {r_ext[rid] - R:.4f} m"
    # classic look-ahead: each follower cuts about D^2 / (2R) inside its predecessor, D = r + h v = 1.2 m
    cut = 1.2**2 / (2 * R)
    for rid in (2, 3, 4):
        step_in = r_cls[rid - 1] - r_cls[rid]
        assert step_in == pytest.approx(cut, rel=0.2), f"follower {rid} cuts {step_in:.4f} m, theory {cut:.4f} m"


@pytest.mark.parametrize("profile", ["s_curve", "circle_speed_change"])
def test_bounded_errors_on_the_reference_profiles(tmp_path, profile):
    result, _ = run_theory(tmp_path, profile, [f"leader.profile={profile}", "duration_s=30"])
    for name, m in result.metrics["followers"].items():
        assert m["collisions"] == 0, name
        assert m["spacing_error_max_m"] < 0.005, name  # the law's own longitudinal look-ahead error
        assert m["lateral_deviation_max_m"] < 0.03, name


def test_speed_changes_are_not_amplified_along_the_chain(tmp_path):
    """The leader's +-0.25 m/s^2 triangles are the longitudinal excitation: acceleration and speed deviation must
    not grow from follower to follower (L2 ratios <= 1; the speed deviation to within 0.5 %)."""
    result, _ = run_theory(tmp_path, "speed", ["leader.profile=circle_speed_change", "duration_s=30"])
    followers = result.metrics["followers"]
    for name in ("robot1", "robot2", "robot3"):
        assert followers[name]["l2_ratio_acceleration"] <= 1.0, (name, followers[name]["l2_ratio_acceleration"])
        assert followers[name]["l2_ratio_speed_deviation"] <= 1.005, name


def test_theory_vs_full_report_overlays_both(tmp_path):
    scenario = parse_scenario(PLATOON.read_text(), overrides=["duration_s=8"])
    result = compare(scenario, "fidelity", ["theory", "full"], tmp_path, jobs=2)
    assert result["ok"] and result["kind"] == "fidelity" and result["variants"] == ["theory", "full"]
    assert (tmp_path / "plots" / "overlay_trajectories_speeds.png").is_file()
    resolved = {v: (tmp_path / v / "scenario.resolved.yaml").read_text() for v in ("theory", "full")}
    assert "model: unicycle" in resolved["theory"] and "type: ideal" in resolved["theory"]
    assert "model: dynamic" in resolved["full"] and "estimate: odometry" in resolved["full"]
    assert "type: itsg5" in resolved["full"]


def test_high_lateral_gain_makes_errors_grow_down_the_chain_and_a_lower_one_does_not(tmp_path):
    """Extended look-ahead on the S-curve, theory fidelity, 8 vehicles at 1 m/s: with k2 = 3.5 the lateral error
    grows from follower to follower and drags the longitudinal error with it (the known low-speed, high-k2
    effect); with k2 = 1.0 both shrink along the chain and every spacing-error L2 ratio stays below 1."""
    common = ["leader.profile=s_curve", "duration_s=45", "vehicles.count=8", "platoon.size=8"]
    high, _ = run_theory(tmp_path, "k2_high", common)
    low, _ = run_theory(tmp_path, "k2_low", [*common, "controller.k2=1.0"])
    lateral_high = [m["lateral_deviation_max_m"] for m in high.metrics["followers"].values()]
    lateral_low = [m["lateral_deviation_max_m"] for m in low.metrics["followers"].values()]
    assert lateral_high[-1] > 1.5 * lateral_high[0]
    assert lateral_low[-1] < lateral_low[0]
    ratios_low = [m["l2_ratio_spacing_error"] for m in low.metrics["followers"].values()][1:]
    assert all(r < 1.0 for r in ratios_low), ratios_low
    assert max(m["l2_ratio_spacing_error"] for m in list(high.metrics["followers"].values())[1:]) > 1.2
