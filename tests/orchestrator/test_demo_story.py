"""The demo tells the whole story: ideal, ITS-G5 as the standard generates it, and ITS-G5 with prediction, side by
side, with a paragraph saying what each difference comes from, in this run's own numbers."""

from __future__ import annotations

import re

import pytest

from orchestrator.batch.compare import STORY, compare, variant_overrides
from orchestrator.scenario import load_scenario

from .test_resolved import REPO

pytestmark = pytest.mark.slow  # the demo's three-variant comparison


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    out = tmp_path_factory.mktemp("story")
    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", ["duration_s=12"])
    return out, compare(scenario, "story", list(STORY), out, jobs=2)


def test_the_three_variants_differ_only_in_channel_and_prediction():
    base = load_scenario(REPO / "scenarios" / "platoon.yaml")
    assert variant_overrides(base, "story", "itsg5_predicted")[-1] == "controller.predict=ctrv"
    assert variant_overrides(base, "story", "itsg5")[-1] == "controller.predict=none"
    with pytest.raises(ValueError, match="allowed: ideal, itsg5, itsg5_predicted"):
        variant_overrides(base, "story", "lossy")


def test_prediction_wins_back_most_of_what_the_cams_age_costs(story):
    _, result = story
    rms = result["summary"]["spacing_error_rms_m"]
    assert rms["ideal"] < rms["itsg5_predicted"] < rms["itsg5"]
    assert rms["itsg5"] - rms["itsg5_predicted"] > 0.9 * (rms["itsg5"] - rms["ideal"])


def test_the_page_explains_each_difference_with_the_runs_numbers(story):
    out, result = story
    page = (out / "comparison.html").read_text()
    assert "<h1>coopsim demo: ideal vs itsg5 vs itsg5_predicted</h1>" in page
    start = page.index("<h2>What each difference comes from</h2>")
    section = page[start:page.index("<h2>", start + 4)]
    for word in ("<i>rate</i>", "<i>delay</i>", "<i>quantisation</i>", "<i>loss</i>"):
        assert word in section
    interval = result["summary"]["interval_mean_s"]["itsg5"]
    assert f"one every {interval:.3g} s" in section
    won = result["summary"]["spacing_error_rms_m"]["itsg5"] - result["summary"]["spacing_error_rms_m"][
        "itsg5_predicted"]
    assert re.search(rf"wins back \({won:.3g} m\)", section)
