"""``channel_variants``: the block each channel type takes when a compare variant or a sweep point switches
``channel.type`` to it, so that one scenario compares the channels with the settings it means (the platooning
message, the CAM rate) instead of each model's defaults."""

from __future__ import annotations

import pytest

from orchestrator.batch.compare import variant_overrides, with_channel
from orchestrator.batch.grid import grid_points, point_overrides
from orchestrator.scenario import ScenarioError, parse_scenario

from .test_resolved import REPO

BASE = """
version: 1
name: variants
duration_s: 2.0
vehicles: {count: 3, template: {preset: auna_rc_1to10, model: kinematic}}
platoon: {size: 3}
controller: {type: ploeg_cacc}
channel: {type: cv2x, platooning_message: true}
"""


def test_a_variant_block_replaces_the_models_defaults():
    variants = {"itsg5": {"platooning_message": {"rate_hz": 20}}}
    assert point_overrides({"channel.type": "itsg5"}, "cv2x", variants) == [
        "channel={platooning_message: {rate_hz: 20}, type: itsg5}", "channel.type=itsg5"]
    assert point_overrides({"channel.type": "ideal"}, "cv2x", variants) == ["channel={type: ideal}",
                                                                             "channel.type=ideal"]
    # the base channel keeps its own block, whatever the variants say
    assert point_overrides({"channel.type": "cv2x"}, "cv2x", variants) == ["channel.type=cv2x"]
    (point,) = grid_points([("channel.type", ["itsg5"])], "cv2x", variants)
    assert point.overrides[0] == "channel={platooning_message: {rate_hz: 20}, type: itsg5}"


def test_compare_and_sweeps_build_each_channel_from_its_variant():
    text = BASE + "channel_variants:\n  ideal: {rate_hz: 10, platooning_message: true}\n" \
                  "  itsg5: {generation: {mode: fixed_rate, fixed_rate_hz: 10}, platooning_message: {rate_hz: 10}}\n"
    scenario = parse_scenario(text)
    itsg5 = with_channel(scenario, "itsg5").channel.model_dump()
    assert itsg5["platooning_message"]["rate_hz"] == 10
    assert (itsg5["generation"]["mode"], itsg5["generation"]["fixed_rate_hz"]) == ("fixed_rate", 10)
    ideal = with_channel(scenario, "ideal").channel.model_dump()
    assert (ideal["type"], ideal["rate_hz"], ideal["platooning_message"]) == ("ideal", 10, True)
    assert with_channel(scenario, "cv2x").channel.model_dump()["platooning_message"] is True
    # without variants a channel starts from its defaults, as before
    plain = with_channel(parse_scenario(BASE), "itsg5").channel.model_dump()
    assert plain.get("platooning_message") is None and plain.get("generation", {}).get("mode", "etsi") == "etsi"


def test_the_study_scenario_gives_every_channel_the_platooning_message_at_10_hz():
    path = REPO / "scenarios" / "platoon_cv2x_study.yaml"
    text = path.read_text()
    scenario = parse_scenario(text, str(path))
    blocks = {c: parse_scenario(text, str(path), variant_overrides(scenario, "channel", c)).channel.model_dump()
              for c in ("ideal", "itsg5", "cv2x")}
    assert blocks["ideal"]["rate_hz"] == 10 and blocks["ideal"]["platooning_message"] is True
    assert blocks["itsg5"]["platooning_message"]["rate_hz"] == 10
    for c in ("itsg5", "cv2x"):
        assert (blocks[c]["generation"]["mode"], blocks[c]["generation"]["fixed_rate_hz"]) == ("fixed_rate", 10)
    assert blocks["cv2x"]["platooning_message"] is True


@pytest.mark.parametrize("block, message", [
    ("{wifi: {}}", "wifi"),
    ("{itsg5: {type: cv2x}}", "names another type (cv2x)"),
])
def test_a_bad_variant_is_refused_naming_the_field(block, message):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(BASE + f"channel_variants: {block}\n")
    text = str(err.value)
    assert "channel_variants" in text and message in text
