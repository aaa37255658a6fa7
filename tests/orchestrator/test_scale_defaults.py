"""Defaults that follow the vehicles' scale: road vehicles get a pure-pursuit look-ahead that grows with speed
(5 m + 0.8 s x v), robots keep theirs, and a value the file sets always wins. With the old 1 m default, 8 cars at
25 m/s on ITS-G5 weave until their range sensors lose the car ahead."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario, parse_scenario
from orchestrator.scenario.scale_defaults import ROAD_LOOKAHEAD, longest_vehicle_m

from .test_platooning_message import SCENARIO as CARS
from .test_resolved import REPO

ITSG5 = CARS.replace("channel: {type: ideal, delay_s: 0.1, platooning_message: true}", "channel: {type: itsg5}")


def test_robots_keep_the_laws_lookahead_and_cars_get_one_that_grows_with_speed():
    robots = load_scenario(REPO / "scenarios" / "platoon.yaml")
    assert robots.controller.lateral is None and longest_vehicle_m(robots.model_dump(mode="json")) == 0.49
    cars = parse_scenario(CARS)
    assert longest_vehicle_m(cars.model_dump(mode="json")) == 4.5
    assert {k: getattr(cars.controller.lateral, k) for k in ROAD_LOOKAHEAD} == ROAD_LOOKAHEAD
    given = parse_scenario(CARS, overrides=["controller.lateral={lookahead_m: 2.0}"])
    assert given.controller.lateral.lookahead_m == 2.0 and given.controller.lateral.lookahead_time_s == 0.0


def _lost_targets(out: Path, *overrides: str) -> tuple[float, dict]:
    result = run_scenario(parse_scenario(ITSG5, overrides=["duration_s=10", "controller.time_gap_s=0.6",
                                                           *overrides]), out)
    trace = pq.read_table(out / "trace" / "vehicles.parquet", columns=["robot", "range_m"]).to_pydict()
    followers = np.asarray(trace["robot"]) > 1
    return float(np.isnan(np.asarray(trace["range_m"])[followers]).mean()), result.run_info


@pytest.mark.slow
def test_eight_cars_on_itsg5_keep_each_other_in_sight_with_the_road_default(tmp_path):
    lost, info = _lost_targets(tmp_path / "default")
    assert lost == 0.0 and info["outcomes"]["collisions"] == 0
    # the robot-scale look-ahead on the same cars: they weave and the range sensors lose the car ahead
    lost_short, _ = _lost_targets(tmp_path / "short", "controller.lateral={lookahead_m: 1.0}")
    assert lost_short > 0.3
    resolved = (tmp_path / "default" / "scenario.resolved.yaml").read_text()
    assert "lookahead_m: 5.0" in resolved and "lookahead_time_s: 0.8" in resolved
