"""The V2X plots of a run: distances at generation time, PDR per distance bin against the analytic reception
probability of the configured radio, and no V2X plots for the ideal channel."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from comms_models.itsg5.params import ItsG5Params
from comms_models.itsg5.radio import reception_probability
from orchestrator.metrics import RunData, Series
from orchestrator.reporting.v2x_plots import _distances, pdr_by_distance
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

from .test_resolved import REPO

pytestmark = pytest.mark.slow  # an ITS-G5 car run with every V2X plot drawn

CARS = ["duration_s=12", "vehicles.count=20", "platoon.size=20", "vehicles.template.preset=passenger_car",
        "leader={profile: constant, params: {speed_mps: 25}}", "controller={type: path_cacc}",
        "outputs.report=true", "outputs.plots=true"]


def test_distances_are_taken_at_the_nearest_sample_of_each_end():
    t = np.array([0, 10, 20], np.int64)
    series = {1: Series(t, {"x": np.array([0.0, 1.0, 2.0]), "y": np.zeros(3)}),
              2: Series(t, {"x": np.array([0.0, 4.0, 8.0]), "y": np.array([0.0, 3.0, 6.0])})}
    d = _distances(series, np.array([1, 1, 2, 3]), np.array([2, 2, 1, 1]), np.array([9, 16, 20, 0], np.int64))
    # t = 9 and 16 -> samples at 10 and 20; robot 3 has no samples
    assert d[:3].tolist() == [np.hypot(3.0, 3.0), np.hypot(6.0, 6.0), np.hypot(6.0, 6.0)] and np.isnan(d[3])


def test_pdr_bins_count_attempts_and_hits():
    distance = np.array([1.0, 2.0, 3.0, 9.0, 10.0, np.nan])
    received = np.array([True, True, False, False, True, True])
    centre, pdr, n, half = pdr_by_distance(distance, received, max_bins=2)
    assert n.tolist() == [3, 2] and pdr.tolist() == [2 / 3, 0.5]
    assert np.all(half > 0) and centre == pytest.approx([2.5, 7.5], rel=1e-3)


@pytest.fixture(scope="module")
def car_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("v2x") / "run"
    result = run_scenario(load_scenario(REPO / "scenarios" / "platoon.yaml", ["channel.type=itsg5", *CARS]), out)
    assert result.ok, result.error
    return out


def test_an_itsg5_run_has_v2x_plots_in_its_report(car_run):
    for name in ("v2x_pdr_distance", "v2x_latency", "v2x_over_time"):
        assert (car_run / "plots" / f"{name}.png").stat().st_size > 10_000
    report = (car_run / "report.html").read_text()
    assert "<h2>V2x pdr distance</h2>" in report and "<h2>V2x over time</h2>" in report


def test_measured_pdr_follows_the_radios_reception_probability(car_run):
    # 20 cars spread over ~400 m, CAMs at ~10 Hz: a light load, so loss is mostly propagation (shadowing and
    # fading) and each well-filled bin's PDR lies near the single-frame probability of the configured radio; the
    # rest is interference (overlapping frames, half duplex), which can only take frames away (measured: up to
    # 0.12 below the curve around 150 m)
    run = RunData.load(car_run)
    v2x = pq.read_table(car_run / "trace" / "v2x.parquet").to_pydict()
    rx = np.asarray(v2x["event"]) == "rx"
    sender, receiver = np.asarray(v2x["sender"])[rx], np.asarray(v2x["receiver"])[rx]
    series = run.series(np.unique(np.r_[sender, receiver]).tolist(), ("x", "y"))
    distance = _distances(series, sender, receiver, np.asarray(v2x["generated_ns"])[rx])
    centre, pdr, n, half = pdr_by_distance(distance, np.asarray(v2x["outcome"])[rx] == "received", max_bins=15)
    radio = ItsG5Params(**{k: v for k, v in run.scenario.channel.model_dump(mode="json").items()
                           if k != "type"}).radio
    theory = reception_probability(centre, radio)
    full = n >= 100
    assert full.sum() >= 5 and theory[full].min() < 0.8  # the bins reach where propagation loses frames
    assert np.max(np.abs(pdr[full] - theory[full])) < 0.15
    assert np.all(pdr[full] <= theory[full] + half[full] + 0.02)  # interference only takes frames away


def test_the_ideal_channel_gets_no_v2x_plots(tmp_path):
    result = run_scenario(load_scenario(REPO / "scenarios" / "platoon.yaml", ["duration_s=2", "outputs.plots=true",
                                                                              "outputs.report=false"]), tmp_path)
    assert result.ok and (tmp_path / "plots" / "speeds.png").exists()
    assert not list((tmp_path / "plots").glob("v2x_*"))


def test_every_generated_cam_has_its_trigger_and_the_dcc_state_is_recorded(car_run):
    triggers = pq.read_table(car_run / "trace" / "cam_triggers.parquet").to_pydict()
    v2x = pq.read_table(car_run / "trace" / "v2x.parquet").to_pydict()
    tx = [(t, s) for t, e, s, o in zip(v2x["t_ns"], v2x["event"], v2x["sender"], v2x["outcome"], strict=True)
          if e == "tx"]
    # each CAM generated went on air or was dropped by DCC: one trigger row each, per station
    assert sorted(triggers["robot"]) == sorted(s for _, s in tx)
    causes = dict(zip(*np.unique(np.asarray(triggers["cause"]), return_counts=True), strict=True))
    assert set(causes) <= {"first", "dynamics", "timer"} and causes["first"] == 20  # one per station
    # the leader holds 25 m/s on a straight road: it moves past the 4 m position threshold every 0.16 s, so every
    # CAM after the first is triggered by its dynamics, 0.16 s apart (rounded up to the 10 ms channel step)
    leader = np.asarray(triggers["robot"]) == 1
    assert set(np.asarray(triggers["cause"])[leader][1:]) == {"dynamics"}
    assert set(np.diff(np.asarray(triggers["t_ns"])[leader][1:])) <= {160_000_000, 170_000_000}
    load = pq.read_table(car_run / "trace" / "channel_load.parquet").to_pydict()
    assert set(load["dcc_t_off_s"]) == {0.1}  # reactive DCC at a low load stays relaxed: T_off = 100 ms
    assert (car_run / "plots" / "v2x_generation.png").stat().st_size > 10_000
