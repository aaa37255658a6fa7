"""``coopsim compare SCENARIO --channels ideal,itsg5,cv2x`` runs every shipped platoon scenario: each channel's run
succeeds on the scenario's seed and is in comparison.json with its own channel model and link figures. The runs are
shortened to 4 s (or 2 s past the last maneuver request); the page itself is covered by test_compare_cv2x.py, so it
is not drawn here."""

from __future__ import annotations

import json

import pytest

from orchestrator.batch import compare as compare_module
from orchestrator.batch.compare import compare
from orchestrator.scenario import parse_scenario

from .test_resolved import REPO

CHANNELS = ["ideal", "itsg5", "cv2x"]
SCENARIOS = [*sorted(p.name for p in (REPO / "scenarios").glob("platoon*.yaml")), "two_platoons.yaml"]
NEEDS_SUMO = {"platoon_cv2x_study.yaml"}

pytestmark = pytest.mark.slow  # three runs per scenario


def test_the_list_holds_every_shipped_platoon_scenario():
    assert {"platoon.yaml", "platoon_cv2x.yaml", "platoon_cv2x_study.yaml", "platoon_dynamic.yaml",
            "platoon_track.yaml", "two_platoons.yaml"} <= set(SCENARIOS)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.external) if n in NEEDS_SUMO else n
                                  for n in SCENARIOS])
def test_compare_runs_the_three_channels(name, tmp_path, monkeypatch):
    if name in NEEDS_SUMO:
        pytest.importorskip("libsumo")
    monkeypatch.setattr(compare_module, "write_comparison_html", lambda *args, **kwargs: None)
    path = REPO / "scenarios" / name
    scenario = parse_scenario(path.read_text(), str(path))
    duration = max([4.0, *(m.at_s + 2.0 for m in scenario.maneuvers)])  # past the last maneuver's request
    result = compare(path, "channel", CHANNELS, tmp_path, jobs=2,
                     overrides=[f"duration_s={duration}", "outputs.plots=false", "outputs.report=false"])
    assert result["ok"], {c: r["run"].get("error") for c, r in result["runs"].items()}
    assert result["variants"] == CHANNELS
    for channel in CHANNELS:
        run = json.loads((tmp_path / channel / "run.json").read_text())
        assert run["channel"] == channel and run["seed"] == scenario.seed
        assert result["runs"][channel]["run"]["channel"] == channel
        # every follower heard its predecessor: a PDR per channel, 1 on the ideal channel
        assert result["summary"]["pdr"][channel] is not None
    assert result["summary"]["pdr"]["ideal"] == 1.0
    assert set(result["summary"]["cbr_mean"]) == set(CHANNELS)  # the radio channels measured their load
    assert result["summary"]["cbr_mean"]["itsg5"] > 0 and result["summary"]["cbr_mean"]["cv2x"] > 0
