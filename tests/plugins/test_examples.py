"""The worked examples of docs/extending.md (docs/examples/coopsim_examples) run for real, in process and hosted
over gRPC, with their results checked against the physics they claim."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.build.world import build_world
from orchestrator.engine.scheduler import BaseObserver
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario
from tests.conformance.checks import check_channel, check_federate_meta, check_law, check_vehicle_model
from tests.orchestrator.processes import coopsim_host

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"


@pytest.fixture(autouse=True)
def examples_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """``coopsim_examples`` on sys.path, as PYTHONPATH=docs/examples would put it."""
    monkeypatch.syspath_prepend(str(EXAMPLES))


class Capture(BaseObserver):
    """Observer keeping copies of the chosen ports whenever they are written."""

    def __init__(self, *ports: str) -> None:
        self.ports = ports
        self.values: dict[str, list[tuple[int, dict[str, np.ndarray]]]] = {p: [] for p in ports}
        self.scheduler: Any = None

    def on_start(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def on_instant(self, t_ns: int, bus: dict[str, Any], stepped: Any) -> None:
        for port in self.ports:
            if port in self.scheduler.written_now:
                self.values[port].append((t_ns, {k: np.array(v, copy=True) for k, v in bus[port].items()}))


def test_the_example_plugins_meet_the_conformance_contracts() -> None:
    from coopsim_examples.channel import LossyBeacons
    from coopsim_examples.federate import GapMonitor
    from coopsim_examples.law import TimeGap
    from coopsim_examples.vehicle import LagUnicycle

    check_law(TimeGap)
    check_channel(LossyBeacons)
    check_vehicle_model(LagUnicycle)
    meta = check_federate_meta(GapMonitor("gaps"))
    assert meta.output("gap_monitor").units == {"gap_m": "m", "predecessor": "robot id"}


def test_law_channel_and_vehicle_examples_in_one_platoon(tmp_path: Path) -> None:
    scenario = load_scenario(EXAMPLES / "platoon_examples.yaml")
    result = run_scenario(scenario, tmp_path / "run")
    assert result.ok, result.error
    trace = pq.read_table(tmp_path / "run" / "trace" / "vehicles.parquet").to_pydict()
    robot, t = np.array(trace["robot"]), np.array(trace["t_s"])
    x, v = np.array(trace["x"]), np.array(trace["v"])
    ids = sorted(set(robot.tolist()))
    gap = x[robot == ids[1]] - x[robot == ids[2]]  # robot1 -> robot2 (they drive straight along x)
    # the law: robot2 starts 3.2 m behind and settles at r + h v = 1.8 m (plus the age of the beacons it uses)
    assert gap[0] == pytest.approx(3.2, abs=1e-9)
    assert gap[-1] == pytest.approx(1.0 + 0.8 * v[robot == ids[2]][-1], abs=0.15)
    assert t[robot == ids[2]][-1] == pytest.approx(20.0)
    # the vehicle model: no steering geometry (steer stays 0), speed follows the 1 m/s leader
    assert np.all(np.array(trace["steer"]) == 0.0)
    assert v[robot == ids[0]][-1] == pytest.approx(1.0, abs=1e-6)
    # the channel: every reception 20 ms after generation; about 80 % of the 200 beacons per link get through
    v2x = pq.read_table(tmp_path / "run" / "trace" / "v2x.parquet").to_pydict()
    rx = np.array(v2x["event"]) == "rx"
    assert np.allclose(np.array(v2x["latency_s"])[rx], 0.02)
    pairs = list(zip(np.array(v2x["receiver"])[rx].tolist(), np.array(v2x["sender"])[rx].tolist(), strict=True))
    for pair in [(ids[1], ids[0]), (ids[2], ids[1]), (ids[2], ids[0])]:
        assert 0.7 * 201 < pairs.count(pair) < 0.9 * 201, (pair, pairs.count(pair))


def gaps_run(remote: str | None = None) -> tuple[Capture, Any]:
    """The gap monitor in the remote example's platoon (in process when ``remote`` is None), ports captured."""
    overrides = ["federates[0].remote=null"] if remote is None else [f"federates[0].remote={remote}"]
    world = build_world(load_scenario(EXAMPLES / "platoon_remote.yaml", overrides))
    capture = Capture("gap_monitor", "state")
    world.scheduler.run([capture])
    return capture, world


def test_the_federate_example_publishes_the_gaps_of_the_ground_truth() -> None:
    capture, world = gaps_run()
    states = dict(capture.values["state"])
    assert len(capture.values["gap_monitor"]) == 101  # 10 s at 10 Hz, both ends included
    for t_ns, out in capture.values["gap_monitor"]:
        state = states[t_ns]
        assert np.array_equal(out["id"], state["id"]) and out["predecessor"].tolist() == [-1, 1, 2]
        expected = np.hypot(np.diff(state["x"]), np.diff(state["y"]))
        assert np.isnan(out["gap_m"][0]) and np.allclose(out["gap_m"][1:], expected, rtol=0, atol=1e-12)
    minimum = world.federates["gaps"].min_gap_m
    assert minimum[2] == pytest.approx(min(o["gap_m"][1] for _, o in capture.values["gap_monitor"]))


@pytest.fixture(scope="module")
def host() -> Iterator[str]:
    """``coopsim host --allow coopsim_examples`` on a free loopback port; its address."""
    with coopsim_host("coopsim_examples", [EXAMPLES]) as address:
        yield address


def test_the_federate_example_hosted_remotely_gives_the_same_gaps(host: str) -> None:
    local, _ = gaps_run()
    remote, world = gaps_run(host)
    assert type(world.federates["gaps"]).__name__ == "RemoteFederate"
    assert len(remote.values["gap_monitor"]) == len(local.values["gap_monitor"]) == 101
    for (t_local, a), (t_remote, b) in zip(local.values["gap_monitor"], remote.values["gap_monitor"], strict=True):
        assert t_local == t_remote
        for key in ("id", "gap_m", "predecessor"):
            assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key], equal_nan=True), key
    assert np.nanmin(remote.values["gap_monitor"][-1][1]["gap_m"]) > 1.0
