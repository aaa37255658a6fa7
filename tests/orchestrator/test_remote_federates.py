"""Federates in another process over gRPC: a real ``coopsim host`` on loopback, started and stopped by pid."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from federates.remote.wire import WireError, decode, encode
from orchestrator.runner import run_scenario
from orchestrator.scenario import ScenarioError, parse_scenario
from tests.orchestrator.processes import coopsim_host

REPO = Path(__file__).resolve().parents[2]
PLATOON = (REPO / "scenarios" / "platoon.yaml").read_text()
QUIET = ["outputs.plots=false", "outputs.report=false", "duration_s=3"]


@pytest.fixture(scope="module")
def host() -> Iterator[str]:
    """``coopsim host --allow tests.orchestrator`` on a free loopback port; its address."""
    with coopsim_host("tests.orchestrator") as address:
        yield address


def federates(sink: Path, remote: str | None, **probe: object) -> str:
    probe_entry = {"name": "probe", "type": "tests.orchestrator.plugins:Probe", "params": {"gain": 2.5, **probe}}
    if remote:
        probe_entry["remote"] = remote
    sink_entry = {"name": "sink", "type": "tests.orchestrator.plugins:Sink", "params": {"path": str(sink)}}
    return f"federates={[probe_entry, sink_entry]}".replace("'", '"').replace("None", "null")


def test_a_remote_federate_is_stepped_exactly_like_an_in_process_one(tmp_path, host):
    """The probe reads the state and the queued receptions and publishes arrays; the sink (in process) records
    every value it got. Over gRPC, everything arrives bit for bit, and the vehicles' traces do not change."""
    runs = {}
    for where, remote in (("local", None), ("remote", host)):
        scenario = parse_scenario(PLATOON, overrides=[*QUIET, federates(tmp_path / f"{where}.npz", remote)])
        runs[where] = run_scenario(scenario, tmp_path / where)
        assert runs[where].ok, runs[where].error
    local, remote = np.load(tmp_path / "local.npz"), np.load(tmp_path / "remote.npz")
    assert set(local.files) == {"id", "v_scaled", "yaw", "receptions", "robots"} == set(remote.files)
    for key in local.files:
        assert local[key].dtype == remote[key].dtype and np.array_equal(local[key], remote[key]), key
    assert len(local["v_scaled"]) == 4 * 151  # 4 robots, t = 0 .. 3 s at 50 Hz
    np.testing.assert_allclose(local["v_scaled"][:4], 2.5)  # 1 m/s at the start, times the gain
    assert local["receptions"].sum() > 0
    assert runs["local"].run_info["digest"] == runs["remote"].run_info["digest"]


def test_a_failing_remote_federate_stops_the_run_with_its_name_and_time(tmp_path, host):
    scenario = parse_scenario(PLATOON, overrides=[*QUIET, federates(tmp_path / "s.npz", host, fail_at_s=1.0)])
    result = run_scenario(scenario, tmp_path / "run")
    assert not result.ok
    assert result.error.federate == "probe" and result.error.t_ns == 1_000_000_000
    assert "remote: RuntimeError: probe cable unplugged" in str(result.error)
    assert (tmp_path / "run" / "trace" / "vehicles.parquet").is_file()  # recorded so far, kept


def test_an_unreachable_host_is_a_clear_error(tmp_path):
    entry = federates(tmp_path / "s.npz", "127.0.0.1:9")  # discard port: nothing listens
    entry = entry.replace('"remote"', '"connect_timeout_s": 1, "remote"')
    scenario = parse_scenario(PLATOON, overrides=[*QUIET, entry])
    result = run_scenario(scenario, tmp_path / "run")
    assert not result.ok and result.error.federate == "probe" and result.error.t_ns == 0
    message = str(result.error)
    assert "no coopsim host answers at 127.0.0.1:9" in message and "coopsim host --listen" in message


def test_remote_entries_are_checked_where_they_can_be():
    # the class lives on the host, so it need not import here
    entry = '[{name: sim, type: "elsewhere.module:Simulator", remote: "10.0.0.5:50051"}]'
    assert parse_scenario(PLATOON, overrides=[f"federates={entry}"]).federates[0].remote == "10.0.0.5:50051"
    with pytest.raises(ScenarioError, match="remote must be 'host:port'"):
        parse_scenario(PLATOON, overrides=['federates=[{name: sim, type: "a.b:C", remote: "10.0.0.5"}]'])


def test_wire_round_trip_is_exact():
    message = {
        "t": 3, "none": None, "flag": True, "name": "robot1", "nested": [1.5, {"a": np.arange(3)}],
        "f64": np.array([0.1, np.nan, -np.inf, 1e-300]), "i64": np.array([-1, 2**40], np.int64),
        "bool": np.array([True, False]), "grid": np.arange(6, dtype=np.float32).reshape(2, 3),
        "empty": np.empty(0), "scalar": np.float64(2.0), "big_endian": np.array([1.0, 2.0], ">f8"),
    }
    back = decode(encode(message))
    for key in ("f64", "i64", "bool", "grid", "empty", "big_endian"):
        assert back[key].dtype == message[key].dtype and back[key].shape == message[key].shape
        assert message[key].tobytes() == back[key].tobytes(), key
    assert back["nested"][1]["a"].tolist() == [0, 1, 2] and back["scalar"] == 2.0 and back["none"] is None
    with pytest.raises(WireError, match="magic"):
        decode(b"XXXX" + encode(1)[4:])
    frame = encode({"a": np.arange(4.0)})
    for cut in (6, 12, len(frame) - 3):  # truncated anywhere: a WireError, never another exception
        with pytest.raises(WireError, match=r"truncated|bad frame"):
            decode(frame[:cut])
    # non-finite floats are not JSON: they cross as scalars all the same, and the header stays strict JSON
    nan_frame = encode({"x": float("nan"), "y": -np.inf})
    assert b"NaN" not in nan_frame and b"Infinity" not in nan_frame
    back = decode(nan_frame)
    assert np.isnan(back["x"]) and back["y"] == -np.inf and isinstance(back["x"], float)
    with pytest.raises(WireError, match="Python objects"):
        encode({"bad": np.array([object()])})
    with pytest.raises(WireError, match="keys must be strings"):
        encode({1: 2})


def test_a_stalled_host_times_out_instead_of_hanging_the_run(tmp_path, host):
    entry = federates(tmp_path / "s.npz", host, stall_at_s=0.5).replace('"remote"', '"call_timeout_s": 1, "remote"')
    result = run_scenario(parse_scenario(PLATOON, overrides=[*QUIET, entry]), tmp_path / "run")
    assert not result.ok and result.error.federate == "probe" and result.error.t_ns == 500_000_000
    assert "did not answer 'step' within 1 s" in str(result.error)


def test_the_host_serves_only_federates_it_was_allowed_to(tmp_path, host):
    # a client must not be able to make the host import and call arbitrary code
    entry = json.dumps([{"name": "evil", "type": "subprocess:Popen", "remote": host, "params": {"args": "true"}}])
    result = run_scenario(parse_scenario(PLATOON, overrides=[*QUIET, f"federates={entry}"]), tmp_path / "run")
    assert not result.ok and result.error.federate == "evil"
    assert "PermissionError: this host does not serve 'subprocess:Popen'" in str(result.error)
