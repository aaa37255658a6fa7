"""Every declared port is recorded with its units; metrics come from the run directory alone.

    physics --state--> odometer (extra, in process or in a ``coopsim host``) --odometer--> recorder
                                                                                            |
    run directory (scenario.resolved.yaml + trace/*.parquet) --> coopsim metrics --> metrics.json
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.metrics import METRICS, RunData, compute_metrics, metrics_json, read_traces
from orchestrator.runner import run_scenario
from orchestrator.scenario import ScenarioError, load_scenario, parse_scenario

pytestmark = pytest.mark.slow  # every shipped scenario run for the module, and a host

REPO = Path(__file__).resolve().parents[2]
PLATOON = (REPO / "scenarios" / "platoon.yaml").read_text()
QUIET = ["outputs.plots=false", "outputs.report=false"]
ODOMETER = {"name": "odo", "type": "tests.orchestrator.recording_plugins:Odometer", "params": {"period_s": 0.05}}


def _federates(*entries: dict) -> str:
    return f"federates={list(entries)}".replace("'", '"').replace("None", "null")


def _coopsim(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


# -- recording -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["in_process", "remote"])
def test_an_extra_federates_port_is_recorded_with_its_units(tmp_path, where, request):
    entry = dict(ODOMETER)
    if where == "remote":
        entry["remote"] = request.getfixturevalue("host")
    scenario = parse_scenario(PLATOON, overrides=[*QUIET, "duration_s=4", _federates(entry)])
    result = run_scenario(scenario, tmp_path)
    assert result.ok, result.error
    table = pq.read_table(tmp_path / "trace" / "odometer.parquet")
    assert table.column_names == ["t_ns", "robot", "distance_m", "speed_kmh"]
    assert table.schema.field("distance_m").metadata == {b"unit": b"m"}
    assert table.schema.field("speed_kmh").metadata == {b"unit": b"km/h"}
    port = json.loads(table.schema.metadata[b"coopsim.port"])
    assert port["producer"] == "odo" and port["index"] == "robot" and port["units"]["distance_m"] == "m"
    # values: the distance integrates the true speed of the vehicles trace (1 m/s leader profile: ~4 m)
    odo = table.to_pydict()
    t, robot, dist = (np.asarray(odo[k]) for k in ("t_ns", "robot", "distance_m"))
    assert set(robot) == {r.id for r in RunData.load(tmp_path).robots}
    vehicles = read_traces(tmp_path, ["vehicles"])["vehicles"]
    for rid in set(robot):
        mine = robot == rid
        at = vehicles["robot"] == rid
        expected = np.sum(vehicles["v"][at][np.isin(vehicles["t_ns"][at], t[mine][:-1])]) * 0.05
        assert dist[mine][-1] == pytest.approx(expected, rel=1e-12)
        assert 3.0 < dist[mine][-1] < 5.0
    assert len(t) == 4 * 81  # 4 robots, t = 0 .. 4 s every 50 ms


def test_remote_and_in_process_odometers_record_the_same_bytes(tmp_path, host):
    tables = {}
    for where, remote in (("local", None), ("remote", host)):
        entry = {**ODOMETER, "remote": remote}
        scenario = parse_scenario(PLATOON, overrides=[*QUIET, "duration_s=2", _federates(entry)])
        assert run_scenario(scenario, tmp_path / where).ok
        tables[where] = pq.read_table(tmp_path / where / "trace" / "odometer.parquet")
    assert tables["local"].equals(tables["remote"])


def test_builtin_event_ports_are_recorded_even_when_empty(tmp_path):
    scenario = parse_scenario(PLATOON, overrides=[*QUIET, "duration_s=1"])
    assert run_scenario(scenario, tmp_path).ok
    collisions = pq.read_table(tmp_path / "trace" / "collisions.parquet")
    assert collisions.num_rows == 0 and collisions.column_names == ["t_ns", "a", "b"]
    rng = pq.read_table(tmp_path / "trace" / "range.parquet")
    assert rng.schema.field("range_m").metadata == {b"unit": b"m"}
    v2x = pq.read_table(tmp_path / "trace" / "v2x.parquet")
    assert json.loads(v2x.schema.metadata[b"coopsim.port"])["producer"] == "v2x"
    assert np.all(np.diff(v2x.column("t_ns").to_numpy()) >= 0)  # rows in time order
    assert not (tmp_path / "trace" / "state.parquet").exists()  # in vehicles.parquet already


def test_a_unit_mismatch_between_federates_is_bad_input_naming_both(tmp_path):
    reader = {"name": "dash", "type": "tests.orchestrator.recording_plugins:KmhReader"}
    scenario = parse_scenario(PLATOON, overrides=[*QUIET, "duration_s=1", _federates(reader)])
    with pytest.raises(ScenarioError) as err:
        run_scenario(scenario, tmp_path)
    message = str(err.value)
    assert "'dash'" in message and "'physics'" in message and "km/h" in message and "m/s" in message
    assert not (tmp_path / "trace" / "vehicles.parquet").exists()


# -- metrics from the run directory ------------------------------------------------------------------------------
SHIPPED = [("platoon.yaml", "duration_s=12"), ("platoon_track.yaml", "duration_s=12"),
           ("platoon_dynamic.yaml", "duration_s=6")]


@pytest.fixture(scope="module")
def shipped_runs(tmp_path_factory) -> dict[str, Path]:
    """The shipped scenarios, shortened, run once for the module (no plots: no test here reads them, and a run with
    plots starts a matplotlib worker)."""
    runs = {}
    for name, duration in SHIPPED:
        out = tmp_path_factory.mktemp(name.split(".")[0])
        result = run_scenario(load_scenario(REPO / "scenarios" / name, overrides=[duration, "outputs.plots=false"]),
                              out)
        assert result.ok, result.error
        runs[name] = out
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name, _ in SHIPPED])
def test_coopsim_metrics_reproduces_metrics_json_byte_for_byte(shipped_runs, name):
    run_dir = shipped_runs[name]
    done = _coopsim("metrics", str(run_dir), "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical" in done.stdout


@pytest.mark.parametrize("name", [name for name, _ in SHIPPED])
def test_metrics_need_nothing_but_the_resolved_scenario_and_the_traces(shipped_runs, name, tmp_path):
    """A fresh directory with only scenario.resolved.yaml and trace/ (no run.json, no live federate: another
    process) gives the same metrics.json, to the byte."""
    run_dir = shipped_runs[name]
    shutil.copy(run_dir / "scenario.resolved.yaml", tmp_path / "scenario.resolved.yaml")
    shutil.copytree(run_dir / "trace", tmp_path / "trace")
    done = _coopsim("metrics", str(tmp_path), "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "metrics.json").read_bytes() == (run_dir / "metrics.json").read_bytes()
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert len(metrics["followers"]) >= 3 and metrics["run"]["collisions"] == 0


def test_the_itsg5_channel_block_comes_from_the_traces(shipped_runs):
    metrics = json.loads((shipped_runs["platoon_track.yaml"] / "metrics.json").read_text())
    channel = metrics["channel"]
    assert 0.0 < channel["cbr_mean"] <= channel["cbr_max"] <= 1.0
    assert channel["cams_sent"] > 0 and 0.9 < channel["pdr_interest"] <= 1.0
    assert sum(channel["interest_outcomes"].values()) > 0
    run_info = json.loads((shipped_runs["platoon_track.yaml"] / "run.json").read_text())
    assert run_info["channel_model"]["frame_bytes"]["hf"] > 100  # model facts stay in run.json


def test_check_fails_when_metrics_json_was_changed(shipped_runs, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(shipped_runs["platoon.yaml"], run_dir)
    text = (run_dir / "metrics.json").read_text().replace('"followers": 3', '"followers": 4')
    (run_dir / "metrics.json").write_text(text)
    done = _coopsim("metrics", str(run_dir), "--check")
    assert done.returncode == 1 and '"followers": 4' in done.stdout


def test_a_directory_that_is_no_run_is_bad_input(tmp_path):
    done = _coopsim("metrics", str(tmp_path))
    assert done.returncode == 2 and "scenario.resolved.yaml is missing" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_new_metric_is_one_function_picked_up_by_metrics_json_and_the_report(shipped_runs, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(shipped_runs["platoon.yaml"], run_dir)
    METRICS.register("gap_p10", "tests.orchestrator.recording_plugins:gap_p10")
    try:
        metrics, _ = compute_metrics(RunData.load(run_dir))
        assert all(0.0 < f["gap_p10_m"] <= f["min_gap_m"] + 10 for f in metrics["followers"].values())
        assert all(f["gap_p10_m"] >= f["min_gap_m"] for f in metrics["followers"].values())
        from orchestrator.cli.metrics_command import run_metrics_command

        class Args:
            check, no_report = False, False

        Args.run_dir = run_dir
        from rich.console import Console

        assert run_metrics_command(Args, Console(quiet=True), Console(quiet=True)) == 0
    finally:
        METRICS.unregister("gap_p10")
    assert '"gap_p10_m"' in (run_dir / "metrics.json").read_text()
    assert "<th>gap_<wbr>p10_<wbr>m</th>" in (run_dir / "report.html").read_text()  # may wrap after "_"
    assert "gap_p10_m" not in metrics_json(compute_metrics(RunData.load(run_dir))[0])


def test_the_vehicles_trace_keeps_its_columns_and_carries_units(shipped_runs):
    table = pq.read_table(shipped_runs["platoon.yaml"] / "trace" / "vehicles.parquet")
    assert table.column_names[:6] == ["t_ns", "t_s", "robot", "x", "y", "yaw"]
    assert {"est_x", "cmd_speed", "pred_age_s", "desired_gap_m", "degraded", "range_m"} <= set(table.column_names)
    units = {f.name: (f.metadata or {}).get(b"unit", b"").decode() for f in table.schema}
    assert units["x"] == "m" and units["v"] == "m/s" and units["cmd_accel"] == "m/s^2" and units["pred_age_s"] == "s"
    assert all(units[c] for c in table.column_names)
