"""Every detector check on honest runs of the shipped scenarios that have V2X (attacks removed, reaction none):
no check flags a single honest message (docs/security-research.md, "False positives on the shipped scenarios";
the table comes from ``python -m tests.orchestrator.honest_runs``). The runs are cut where nothing new happens
(``honest_runs.SHORT_S``: the joins, the leave, the split and the merge all inside)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from comms_models.misbehaviour.checks import CHECKS
from tests.orchestrator.honest_runs import NEEDS_SUMO, SCENARIOS, SHORT_S, rates, run_all

# honest messages at least (about 90 % of what each run hears): a run that heard less did not exercise the checks
MIN_MESSAGES = {"platoon": 18_000, "platoon_dynamic": 18_000, "highway_maneuvers": 80_000, "two_platoons": 8_000,
                "attacks_platoon": 1_800, "attacks_jamming": 1_800, "attacks_dataset": 6_000, "platoon_track": 800,
                "platoon_cv2x": 1_800, "highway_sumo": 1_800}


def check_rates(out: Path, name: str) -> None:
    r = rates(out)
    honest = r["honest"]
    assert honest >= MIN_MESSAGES[name], name
    resolved = yaml.safe_load((out / "scenario.resolved.yaml").read_text())
    assert resolved["detection"]["params"]["checks"] == list(CHECKS)  # every check judged every message
    flagged = {check: n for check, n in r["by_check"].items() if n}
    assert not flagged, f"{name}: of {honest} honest messages, flagged per check: {flagged}"
    assert r["false_positives"] == 0


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    names = tuple(n for n in SCENARIOS if n not in NEEDS_SUMO)
    return run_all(tmp_path_factory.mktemp("honest"), names, SHORT_S)


@pytest.mark.slow  # nine runs, 67 s of CPU (83 s whole), two at a time
@pytest.mark.parametrize("name", [n for n in SCENARIOS if n not in NEEDS_SUMO])
def test_each_check_stays_quiet_on_an_honest_run(honest: dict[str, Path], name: str) -> None:
    check_rates(honest[name], name)


@pytest.mark.slow
@pytest.mark.external  # SUMO (the sumo extra)
def test_each_check_stays_quiet_on_honest_sumo_traffic(tmp_path: Path) -> None:
    pytest.importorskip("libsumo")
    out = run_all(tmp_path, NEEDS_SUMO)
    check_rates(out["highway_sumo"], "highway_sumo")
