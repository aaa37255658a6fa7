"""Federates in another process over gRPC: a real ``coopsim host`` on loopback, started and stopped by pid."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from federates.remote.codec import CodecError, decode_map, decode_port, encode_map, encode_port, pb
from orchestrator.runner import run_scenario
from orchestrator.scenario import ScenarioError, parse_scenario

REPO = Path(__file__).resolve().parents[2]
PLATOON = (REPO / "scenarios" / "platoon.yaml").read_text()
QUIET = ["outputs.plots=false", "outputs.report=false", "duration_s=3"]


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


def test_port_values_and_parameters_cross_the_protocol_exactly():
    port = {
        "f64": np.array([0.1, np.nan, -np.inf, 1e-300, -0.0]), "i64": np.array([-1, 2**40, -(2**63)], np.int64),
        "bool": np.array([True, False]), "grid": np.arange(6, dtype=np.float32).reshape(2, 3),
        "codes": np.array([0, 3, 255], np.uint8), "names": np.array(["robot1", "", "é"], dtype=object),
        "empty": np.empty(0), "big_endian": np.array([1.0, 2.0], ">f8"), "scalar": np.float64(2.0),
    }
    payload = np.frombuffer(bytes.fromhex("0100000000f8ff7f"), np.float64)  # a NaN with a payload of 1
    port["nan_payload"] = payload.copy()
    back = decode_port(encode_port(port, pb.PortValue(), "p"), "p")
    assert list(back) == list(port)  # field order kept
    for key in ("f64", "i64", "bool", "grid", "codes", "empty", "nan_payload"):
        assert back[key].dtype == port[key].dtype and back[key].shape == port[key].shape, key
        assert port[key].tobytes() == back[key].tobytes(), key
    assert back["names"].dtype == object and back["names"].tolist() == ["robot1", "", "é"]
    assert back["big_endian"].dtype == np.float64 and back["big_endian"].tolist() == [1.0, 2.0]  # sent little-endian
    assert back["scalar"] == 2.0 and isinstance(back["scalar"], float)
    params = {"n": 3, "x": 3.0, "nan": float("nan"), "none": None, "flag": False, "name": "a",
              "nested": [1, {"b": [2.5, "c"]}], "big": 2**63 - 1}
    got = decode_map(encode_map(params, pb.ValueMap()))
    assert isinstance(got["n"], int) and isinstance(got["x"], float) and np.isnan(got["nan"])
    assert {k: v for k, v in got.items() if k != "nan"} == {k: v for k, v in params.items() if k != "nan"}
    # what cannot cross exactly is refused, naming where it is
    with pytest.raises(CodecError, match=r"^p.bad: an object array can only hold strings"):
        encode_port({"bad": np.array([object()])}, pb.PortValue(), "p")
    with pytest.raises(CodecError, match=r"^p.c: dtype complex128 cannot be sent"):
        encode_port({"c": np.zeros(2, complex)}, pb.PortValue(), "p")
    with pytest.raises(CodecError, match=r"^params.huge: the integer 18446744073709551616 does not fit"):
        encode_map({"huge": 2**64}, pb.ValueMap(), "params")
    with pytest.raises(CodecError, match="keys must be strings"):
        encode_map({1: 2}, pb.ValueMap())
    # and a message whose bytes do not match its shape is refused, naming the field
    message = encode_port({"a": np.arange(4.0), "grid": np.zeros((1, 1))}, pb.PortValue(), "p")  # field form
    message.fields[0].value.array.data = message.fields[0].value.array.data[:-3]
    with pytest.raises(CodecError, match=r"^p.a: 29 bytes for shape \(4,\) of float64 \(32 expected\)"):
        decode_port(message, "p")


def test_plain_columns_are_packed_into_one_aligned_buffer_and_read_back_exactly():
    port = {"id": np.array([7, 9], np.int64), "flag": np.array([True, False]), "code": np.array([1, 2, 3], np.uint8),
            "v": np.array([np.nan, -0.0])}
    message = encode_port(port, pb.PortValue(), "p")
    assert not message.fields and list(message.columns.names) == ["id", "flag", "code", "v"]
    assert list(message.columns.lengths) == [2, 2, 3, 2] and len(message.columns.data) == 16 + 8 + 8 + 16
    for copy in (True, False):
        back = decode_port(message, "p", copy=copy)
        assert list(back) == list(port)
        for key, value in port.items():
            assert back[key].dtype == value.dtype and back[key].tobytes() == value.tobytes(), key
            assert back[key].flags.aligned and back[key].flags.writeable == copy, key
    # a length that runs past the buffer is refused, naming the column
    message.columns.lengths[3] = 3
    with pytest.raises(CodecError, match=r"^p.v: 3 float64 values run past the 48 bytes"):
        decode_port(message, "p")


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


def test_the_host_answers_hello_with_its_version_and_refuses_another_one(host):
    import grpc

    from federates.remote.host import METHOD

    def first_reply(request: pb.Request) -> pb.Reply:
        with grpc.insecure_channel(host) as channel:
            replies = channel.stream_stream(METHOD)(iter([request.SerializeToString()]), timeout=20)
            return pb.Reply.FromString(next(replies))

    welcome = first_reply(pb.Request(hello=pb.Hello(protocol_version=1, capabilities=["spawn_requests"])))
    assert not welcome.HasField("error") and welcome.welcome.protocol_version == 1
    assert list(welcome.welcome.capabilities) == ["spawn_requests"]
    refused = first_reply(pb.Request(hello=pb.Hello(protocol_version=2)))
    assert refused.error.type == "RuntimeError"
    assert refused.error.message == "this host speaks protocol version 1 (coopsim.federate.v1), the client 2"
