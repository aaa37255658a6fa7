"""The physics federate driven through the orchestrator: model selection per robot, sensor estimates, the range
port, collision events and determinism."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from core.federate import SetupContext
from core.robot_blocks import InitialState, VehicleBlock
from core.robots import RobotSpec
from federates.physics.collisions import colliding_pairs
from federates.physics.config import PhysicsConfig
from federates.physics.federate import PhysicsFederate
from federates.physics.models.dynamic import DynamicSingleTrack
from federates.physics.models.kinematic import KinematicBicycle
from federates.physics.presets import preset
from orchestrator.build.world import build_world
from orchestrator.engine.scheduler import BaseObserver
from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

REPO = Path(__file__).resolve().parents[2]
STEP_NS = 10_000_000


def scenario_text(**blocks: Any) -> str:
    """A small scenario (no plots, no report) with the given top-level blocks replacing the defaults."""
    data: dict[str, Any] = {
        "version": 1, "name": "physics_test", "seed": 7, "duration_s": 5.0, "step_s": 0.01,
        "vehicles": {"count": 2, "template": {"preset": "auna_rc_1to10", "model": "dynamic"}},
        "leader": {"profile": "constant", "params": {"speed_mps": 1.0}},
        "controller": {"type": "ela_cacc", "period_s": 0.02},
        "channel": {"type": "ideal"},
        "outputs": {"trace": True, "plots": False, "report": False},
    }
    data.update(blocks)
    return yaml.safe_dump(data, sort_keys=False)


class PortLog(BaseObserver):
    """Keeps every new value of the given ports with the state published at the same instant."""

    def __init__(self, *ports: str) -> None:
        self.ports = ports
        self.rows: dict[str, list[tuple[int, Any, Any]]] = {p: [] for p in ports}
        self._last: dict[str, Any] = {}

    def on_instant(self, t_ns: int, bus: dict, stepped: Sequence[str]) -> None:
        for port in self.ports:
            value = bus.get(port)
            if value is not None and value is not self._last.get(port):
                self._last[port] = value
                self.rows[port].append((t_ns, value, bus.get("state")))


def run_world(text: str, *ports: str) -> tuple[Any, PortLog]:
    """Build and run the scenario in memory; returns the world and the log of ``ports``."""
    world = build_world(parse_scenario(text))
    log = PortLog(*ports)
    world.scheduler.run([log])
    return world, log


def spec(robot_id: int, model: str, preset: str = "auna_rc_1to10", x: float = 0.0, y: float = 0.0,
         **params: Any) -> RobotSpec:
    return RobotSpec(id=robot_id, name=f"r{robot_id}", vehicle=VehicleBlock(preset, model, params),
                     initial=InitialState(x=x, y=y, yaw=0.0, v=1.0))


def test_mixed_fleet_steps_each_robot_with_its_model_in_roster_order() -> None:
    specs = [
        spec(11, "kinematic", x=0.0),
        spec(12, "dynamic", "mit_racecar_1to10", x=-2.0),
        spec(13, "kinematic", y=3.0),
        spec(14, "dynamic", "g35_sedan", x=-20.0),
        spec(15, "dynamic", "auna_rc_1to10", y=-3.0, input_mode="accel_steer"),
    ]
    fed = PhysicsFederate("physics", STEP_NS)
    fed.setup(SetupContext(seed=1, end_ns=10**9))
    fed.spawn(specs)
    assert set(fed._groups) == {("kinematic", "speed_steer"), ("dynamic", "speed_steer"), ("dynamic", "accel_steer")}
    assert isinstance(fed._groups[("kinematic", "speed_steer")], KinematicBicycle)
    assert isinstance(fed._groups[("dynamic", "speed_steer")], DynamicSingleTrack)
    assert fed._groups[("dynamic", "accel_steer")].input_mode == "accel_steer"
    # reference: each robot alone in its own model, driven by the same commands
    refs = []
    for s in specs:
        mode = s.vehicle.overrides.get("input_mode", "speed_steer")
        cls = KinematicBicycle if s.vehicle.model == "kinematic" else DynamicSingleTrack
        model = cls(0.01) if mode == "speed_steer" else cls(0.01, input_mode=mode)
        model.add([dict(preset(s.vehicle.preset), **s.vehicle.overrides)],
                  {k: np.array([getattr(s.initial, k)]) for k in ("x", "y", "yaw", "v")})
        refs.append(model)
    ids = np.array([s.id for s in specs], np.int64)
    rng = np.random.default_rng(3)
    out = fed.step(0, {"commands": None})
    for k in range(1, 150):
        cmd = {"id": ids, "speed": 1.0 + rng.uniform(0, 1, 5), "accel": rng.uniform(-1, 1, 5),
               "steer": rng.uniform(-0.2, 0.2, 5), "yaw_rate": np.zeros(5)}
        out = fed.step(k * STEP_NS, {"commands": cmd})
        for row, model in enumerate(refs):
            model.step({key: np.asarray(cmd[key][row:row + 1]) for key in ("speed", "accel", "steer", "yaw_rate")})
    state = out["state"]
    assert list(state["id"]) == list(ids)
    for row, model in enumerate(refs):
        for key in ("x", "y", "yaw", "v", "steer"):
            assert state[key][row] == model.state[key][0], (row, key)
    # a despawn in the middle keeps the others' rows and values
    fed.despawn([12])
    after = fed.step(150 * STEP_NS, {"commands": None})["state"]
    assert list(after["id"]) == [11, 13, 14, 15]
    np.testing.assert_allclose(after["x"], state["x"][[0, 2, 3, 4]], atol=0.05)  # one more step from its own row


def test_presets_run_with_the_dynamic_model_through_the_world() -> None:
    vehicles = [
        {"name": "lead",
         "vehicle": {"preset": "auna_rc_1to10", "model": "dynamic", "params": {"tyre_model": "pacejka"}}},
        {"name": "mit", "vehicle": {"preset": "mit_racecar_1to10", "model": "dynamic"}},
        {"name": "kin", "vehicle": {"preset": "auna_rc_1to10", "model": "kinematic"}},
    ]
    _, log = run_world(scenario_text(vehicles=vehicles, duration_s=3.0), "state")
    state = log.rows["state"][-1][1]
    assert list(state["id"]) == [1, 2, 3]
    assert np.all(np.diff(state["x"]) < 0)  # each robot behind its predecessor: rows are the roster's
    assert np.allclose(state["v"], 1.0, atol=0.05)
    g35 = scenario_text(vehicles={"count": 2, "template": {"preset": "g35_sedan", "model": "dynamic"}},
                        leader={"profile": "constant", "params": {"speed_mps": 15.0}}, duration_s=3.0)
    _, log = run_world(g35, "state")
    assert np.allclose(log.rows["state"][-1][1]["v"], 15.0, atol=0.3)


def _drift(mu: float) -> float:
    """Final odometry position error of a lone robot on a 2 m/s circle (a_y = 2 m/s^2) with tyre friction ``mu``.

    Odometry moves the pose along the gyro heading by the rear wheels' rolled distance; the rear axle's side slip
    (larger as a_y approaches mu g) is what it cannot see."""
    text = scenario_text(
        vehicles={"count": 1, "template": {"preset": "auna_rc_1to10", "model": "dynamic", "params": {"mu": mu}}},
        leader={"profile": "circle", "params": {"speed_mps": 2.0, "yaw_rate_radps": 1.0}},
        duration_s=10.0, physics={"estimate": "odometry", "odometry": {"noise_rel": 0.0}},
    )
    _, log = run_world(text, "state", "estimate")
    truth, est = log.rows["state"][-1][1], log.rows["estimate"][-1][1]
    return float(np.hypot(truth["x"][0] - est["x"][0], truth["y"][0] - est["y"][0]))


def test_odometry_estimate_drifts_more_with_slip() -> None:
    grippy, medium, slippery = _drift(0.9), _drift(0.3), _drift(0.22)
    assert grippy > 0.05  # 20 m driven: even with grip the estimate has left the truth
    assert grippy < medium < slippery
    assert slippery > 1.3 * grippy


def _gnss_error(estimate: str) -> float:
    text = scenario_text(
        vehicles={"count": 1, "template": {"preset": "auna_rc_1to10", "model": "kinematic"}},
        leader={"profile": "circle", "params": {"speed_mps": 1.0, "yaw_rate_radps": 0.3}},
        duration_s=30.0,
        physics={"estimate": estimate, "odometry": {"scale_error_std": 0.03},
                 "imu": {"yaw_rate_bias_std": 0.02}, "gnss": {"period_s": 0.2, "pos_std_m": 0.2}},
    )
    _, log = run_world(text, "state", "estimate")
    errors = [np.hypot(s["x"] - e["x"], s["y"] - e["y"])[0]
              for (_, e, s) in log.rows["estimate"] if s is not None]
    return float(np.max(errors[-500:]))


def test_odometry_gnss_stays_bounded_where_odometry_drifts() -> None:
    odometry, fused = _gnss_error("odometry"), _gnss_error("odometry_gnss")
    assert fused < 0.3
    assert fused < odometry / 3


def test_range_port_gives_bumper_gap_to_predecessor() -> None:
    text = scenario_text(vehicles={"count": 3, "template": {"preset": "auna_rc_1to10", "model": "dynamic"}},
                         duration_s=3.0)
    _, log = run_world(text, "range")
    sigma = PhysicsConfig().range_sensor.range_noise_std_m
    dims = preset("auna_rc_1to10")
    length, rear = dims["length_m"], dims["rear_overhang_m"]
    samples = log.rows["range"]
    assert len(samples) == 3.0 / 0.05 + 1  # every 50 ms, from t = 0
    residuals = []
    for _, rng, state in samples:
        assert list(rng["id"]) == list(state["id"]) == [1, 2, 3]
        assert list(rng["target"]) == [-1, 1, 2]
        assert np.isnan(rng["range_m"][0])
        gap = (state["x"][:-1] - rear) - (state["x"][1:] + length - rear)
        residuals.extend(rng["range_m"][1:] - gap)
    residuals = np.asarray(residuals)
    assert np.all(np.abs(residuals) < 5 * sigma)
    assert abs(residuals.mean()) < 3 * sigma / np.sqrt(len(residuals))
    assert 0.5 * sigma < residuals.std() < 1.5 * sigma


def test_range_rows_follow_the_roster_through_a_spawn() -> None:
    text = scenario_text(vehicles={"count": 3, "template": {"preset": "auna_rc_1to10", "model": "kinematic"},
                                   "overrides": {"robot2": {"spawn_at_s": 1.005}}}, duration_s=2.0)
    _, log = run_world(text, "range")
    assert [len(r["id"]) for _, r, _ in log.rows["range"]][:2] == [2, 2]
    for _, rng, state in log.rows["range"]:
        assert list(rng["id"]) == list(state["id"])
    last = log.rows["range"][-1][1]
    assert list(last["target"]) == [-1, 1, 2]


def _overlap_vehicles(names: tuple[str, str] = ("robot0", "robot1")) -> list[dict[str, Any]]:
    """Two robots whose bodies overlap at the start (0.3 m apart, 0.49 m long) and a third far away."""
    return [
        {"name": names[0], "initial": {"x": 0.0, "y": 0.0}},
        {"name": names[1], "initial": {"x": -0.3, "y": 0.0}},
        {"name": "far", "initial": {"x": 0.0, "y": 20.0}},
    ]


def test_overlapping_robots_give_one_collision_event() -> None:
    text = scenario_text(vehicles=_overlap_vehicles(), platoon={"size": 1}, duration_s=1.0)
    world, log = run_world(text, "collisions")
    physics = world.federates["physics"]
    assert physics.collisions == [(0, 1, 2)]  # reported once although the contact lasts
    events = [(t, rows) for t, rows, _ in log.rows["collisions"] if len(rows["a"])]
    assert len(events) == 1
    t_ns, rows = events[0]
    assert t_ns == 0 and list(rows["t_ns"]) == [0] and list(rows["a"]) == [1] and list(rows["b"]) == [2]


def test_screening_misses_no_contact() -> None:
    """A robot driving into a stopped one: the event comes at the first step whose bodies overlap."""
    fed = PhysicsFederate("physics", STEP_NS)
    fed.setup(SetupContext(seed=1, end_ns=10**9))
    fed.spawn([spec(1, "kinematic", x=1.0), spec(2, "kinematic", x=0.0), spec(3, "dynamic", y=0.4, x=3.0)])
    ids = np.array([1, 2, 3], np.int64)
    cmd = {"id": ids, "speed": np.array([0.0, 3.0, 0.0]), "accel": np.zeros(3), "steer": np.array([0.0, 0.0, 0.0]),
           "yaw_rate": np.zeros(3)}
    first_overlap = None
    for k in range(100):
        out = fed.step(k * STEP_NS, {"commands": cmd})
        st = out["state"]
        if first_overlap is None and len(colliding_pairs(st["x"], st["y"], st["yaw"], 0.49, 0.18, 0.085)):
            first_overlap = k * STEP_NS
    assert first_overlap is not None
    assert fed.collisions[0] == (first_overlap, 1, 2)


def test_stop_on_collision_fails_the_run_through_the_cli(tmp_path: Path) -> None:
    text = scenario_text(vehicles=_overlap_vehicles(("alpha", "bravo")), platoon={"size": 1}, duration_s=1.0,
                         physics={"stop_on_collision": True})
    path = tmp_path / "crash.yaml"
    path.write_text(text, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(path), "--out", str(tmp_path / "out"),
                           "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "alpha" in done.stderr and "bravo" in done.stderr
    info = json.loads((tmp_path / "out" / "run.json").read_text())
    assert info["status"] == "failed" and info["error"]["robot"] == "alpha/bravo"


NOISY = {"estimate": "odometry_gnss", "odometry": {"scale_error_std": 0.01, "heading_source": "imu"},
         "imu": {"yaw_rate_bias_std": 0.01}}


def _digest(tmp_path: Path, name: str, seed: int) -> str:
    text = scenario_text(vehicles={"count": 3, "template": {"preset": "auna_rc_1to10", "model": "dynamic"}},
                         leader={"profile": "s_curve", "params": {"speed_mps": 1.0}}, duration_s=4.0, physics=NOISY)
    result = run_scenario(parse_scenario(text), tmp_path / name, seed=seed)
    assert result.ok
    return json.loads((tmp_path / name / "run.json").read_text())["digest"]


def test_noisy_sensors_are_deterministic_per_seed(tmp_path: Path) -> None:
    first, again, other = _digest(tmp_path, "a", 1), _digest(tmp_path, "b", 1), _digest(tmp_path, "c", 2)
    assert first == again
    assert first != other


@pytest.mark.parametrize("count", [2, 3])
def test_per_robot_constants_do_not_depend_on_other_robots(count: int) -> None:
    fed = PhysicsFederate("physics", STEP_NS, PhysicsConfig(**NOISY))
    fed.setup(SetupContext(seed=9, end_ns=10**9))
    fed.spawn([spec(i, "dynamic", y=3.0 * i) for i in range(1, count + 1)])
    reference = PhysicsFederate("physics", STEP_NS, PhysicsConfig(**NOISY))
    reference.setup(SetupContext(seed=9, end_ns=10**9))
    reference.spawn([spec(2, "dynamic", y=6.0)])  # robot 2 alone
    assert fed._odometry is not None and reference._odometry is not None
    assert fed._imu is not None and reference._imu is not None
    np.testing.assert_array_equal(fed._odometry._scale[1], reference._odometry._scale[0])
    assert fed._imu.bias[1] == reference._imu.bias[0]
    assert fed._imu.bias[0] != fed._imu.bias[1]


def test_sensor_noise_of_a_robot_does_not_change_when_another_robot_joins(tmp_path):
    """Per-step noise is keyed by (seed, federate, purpose, robot id, time): a fifth robot at the tail of the
    platoon (it influences nobody ahead of it) leaves the noisy estimates of the first four bit-identical."""
    from orchestrator.runner import run_scenario
    from orchestrator.scenario import load_scenario

    path = Path(__file__).resolve().parents[2] / "scenarios" / "platoon_dynamic.yaml"
    common = ["duration_s=4", "outputs.plots=false", "outputs.report=false", "physics.estimate=odometry_gnss",
              "physics.odometry.scale_error_std=0.01"]
    traces = {}
    for count in (4, 5):
        out = tmp_path / str(count)
        assert run_scenario(load_scenario(path, [*common, f"vehicles.count={count}", "platoon.size=5"]), out).ok
        table = pq.read_table(out / "trace" / "vehicles.parquet").to_pydict()
        robot = np.asarray(table["robot"])
        traces[count] = {col: np.asarray(table[col])[robot <= 4] for col in ("est_x", "est_y", "est_v", "range_m", "x")}
    for col in ("est_x", "est_y", "est_v"):
        assert np.array_equal(traces[4][col], traces[5][col]), col
    assert np.array_equal(traces[4]["range_m"], traces[5]["range_m"], equal_nan=True)  # keyed range noise too
    assert np.any(traces[4]["est_x"] != traces[4]["x"])  # the estimates really are noisy
