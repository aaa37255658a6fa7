"""Every detector check on honest runs of the shipped scenarios that have V2X (attacks removed, reaction none):
the false-positive rate of each check per scenario stays within what docs/security-research.md reports
("False positives on the shipped scenarios"; the table comes from ``python -m tests.orchestrator.honest_runs``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from comms_models.misbehaviour.checks import CHECKS
from tests.orchestrator.honest_runs import NEEDS_SUMO, SCENARIOS, rates, run_all

BOUND = {  # scenario -> check -> largest false-positive rate (the reported count, rounded up); 0 where not named
    "two_platoons": {"sudden_appearance": 6e-4, "desired_accel": 6e-4},  # the joiner, first heard when it joins
    "highway_maneuvers": {"sudden_appearance": 1e-4, "position_speed": 2e-5},  # joiners and the leaver's lane change
}
MIN_MESSAGES = {"platoon": 20_000, "platoon_dynamic": 20_000, "highway_maneuvers": 90_000, "two_platoons": 10_000}


def check_rates(out: Path, name: str) -> None:
    r = rates(out)
    honest = r["honest"]
    assert honest >= MIN_MESSAGES.get(name, 500), name
    for check in CHECKS:
        rate = r["by_check"][check] / honest
        assert rate <= BOUND.get(name, {}).get(check, 0.0), f"{name}: {check} flagged {r['by_check'][check]} of " \
                                                           f"{honest} honest messages"
    assert r["by_check"]["kalman"] == 0  # the Kalman residuals never fire on an honest run


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    names = tuple(n for n in SCENARIOS if n not in NEEDS_SUMO)
    return run_all(tmp_path_factory.mktemp("honest"), names)


@pytest.mark.slow  # nine full runs, ~5 min on two cores
@pytest.mark.parametrize("name", [n for n in SCENARIOS if n not in NEEDS_SUMO])
def test_each_check_stays_quiet_on_an_honest_run(honest: dict[str, Path], name: str) -> None:
    check_rates(honest[name], name)


@pytest.mark.slow
@pytest.mark.external  # SUMO (the sumo extra)
def test_each_check_stays_quiet_on_honest_sumo_traffic(tmp_path: Path) -> None:
    pytest.importorskip("libsumo")
    out = run_all(tmp_path, NEEDS_SUMO)
    check_rates(out["highway_sumo"], "highway_sumo")
