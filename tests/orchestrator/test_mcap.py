"""run.mcap: what `outputs.mcap: true` and `coopsim mcap RUN_DIR` write, read back with the mcap reader and checked
against the Parquet traces of the same run.

Values are compared exactly: JSON numbers are written with Python's shortest round-trip repr, so a float read back
equals the float in the trace bit for bit (a NaN field is left out of the message). Quaternions are compared with
sin/cos of the trace's yaw computed the same way.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

pytest.importorskip("mcap")
from mcap.reader import make_reader

from orchestrator.cli.main import main
from orchestrator.mcap_export import messages, schemas, sources
from orchestrator.mcap_export.export import write_mcap

REPO = Path(__file__).resolve().parents[2]
PLATOON = REPO / "scenarios" / "platoon.yaml"
SHORT = ["--set", "duration_s=3", "--set", "outputs.plots=false", "--set", "outputs.report=false"]
NAMES = {1: "robot0", 2: "robot1", 3: "robot2", 4: "robot3"}


def _run(out: Path, *extra: str) -> None:
    assert main(["run", str(PLATOON), "--out", str(out), "--quiet", *SHORT, *extra]) == 0


@pytest.fixture(scope="module", params=["ideal", "itsg5"])
def run_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3 s platoon run with run.mcap; the itsg5 one has two platoons of two (platoon.size=2) and robots that
    estimate their pose from odometry (so odom differs from the truth and map -> odom is not the identity)."""
    out = tmp_path_factory.mktemp(f"mcap-{request.param}") / "run"
    _run(out, *_variant(request.param))
    return out


def _variant(channel: str) -> list[str]:
    extra = ["--set", "platoon.size=2", "--set", "physics.estimate=odometry"] if channel == "itsg5" else []
    return ["--set", "outputs.mcap=true", "--set", f"channel.type={channel}", *extra]


def _read(path: Path) -> tuple[dict[str, str], dict[str, list[tuple[int, int, dict[str, Any]]]], Any]:
    """Topic -> schema name, topic -> [(log_time, publish_time, message)] in file order, and the summary."""
    schema_of: dict[str, str] = {}
    topics: dict[str, list[tuple[int, int, dict[str, Any]]]] = defaultdict(list)
    with path.open("rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        for schema, channel, message in reader.iter_messages(log_time_order=False):
            assert schema.encoding == "jsonschema" and channel.message_encoding == "json"
            schema_of[channel.topic] = schema.name
            topics[channel.topic].append((message.log_time, message.publish_time, json.loads(message.data)))
    return schema_of, topics, summary


def _table(run_dir: Path, name: str) -> list[dict[str, Any]]:
    return pq.read_table(run_dir / "trace" / f"{name}.parquet").to_pylist()


def _ns(stamp: dict[str, int]) -> int:
    return stamp["sec"] * 1_000_000_000 + stamp["nsec"]


def _num(value: float) -> float | None:
    return None if math.isnan(value) else value


def test_topics_carry_the_foxglove_schemas_we_claim(run_dir: Path) -> None:
    schema_of, _, _ = _read(run_dir / "run.mcap")
    expected = {"/tf": "foxglove.FrameTransforms", "/scene": "foxglove.SceneUpdate",
                "/v2x/received": "coopsim.V2xReception"}
    for name in NAMES.values():
        expected |= {f"/{name}/pose": "foxglove.PoseInFrame", f"/{name}/odom": "coopsim.Odometry",
                     f"/{name}/range": "coopsim.Range"}
    assert schema_of == expected


def test_message_counts_per_topic_match_the_traces(run_dir: Path) -> None:
    _, topics, summary = _read(run_dir / "run.mcap")
    vehicles = _table(run_dir, "vehicles")
    per_robot = Counter(r["robot"] for r in vehicles)
    ranges = Counter(r["robot"] for r in _table(run_dir, "range"))
    counts = {topic: len(items) for topic, items in topics.items()}
    expected = {"/tf": len({r["t_ns"] for r in vehicles}), "/scene": 1,
                "/v2x/received": len(_table(run_dir, "cam_rx"))}
    for rid, name in NAMES.items():
        expected |= {f"/{name}/pose": per_robot[rid], f"/{name}/odom": per_robot[rid],
                     f"/{name}/range": ranges[rid]}
    assert counts == expected
    assert expected["/tf"] == 301 and expected["/v2x/received"] > 0  # 3 s at 10 ms, both ends included
    # every reception the channel log calls "received" is in cam_rx, hence in the recording
    log = _table(run_dir, "v2x")
    assert expected["/v2x/received"] == sum(1 for r in log if r["event"] == "rx" and r["outcome"] == "received")
    assert summary.statistics.message_count == sum(expected.values())


def test_log_and_publish_times_are_the_simulation_times(run_dir: Path) -> None:
    _, topics, _ = _read(run_dir / "run.mcap")
    last = -1
    with (run_dir / "run.mcap").open("rb") as f:  # file order is time order across topics
        for _, _, message in make_reader(f).iter_messages(log_time_order=False):
            assert message.log_time >= last
            last = message.log_time
    for topic, items in topics.items():
        for log_time, publish_time, message in items:
            assert publish_time == log_time
            if topic == "/tf":
                assert {_ns(t["timestamp"]) for t in message["transforms"]} == {log_time}
            elif topic == "/scene":
                assert {_ns(e["timestamp"]) for e in message["entities"]} == {log_time}
            else:
                assert _ns(message["timestamp"]) == log_time
    assert last == 3_000_000_000


def test_poses_and_odometry_equal_the_vehicles_trace(run_dir: Path) -> None:
    _, topics, _ = _read(run_dir / "run.mcap")
    rows = defaultdict(list)
    for row in _table(run_dir, "vehicles"):
        rows[row["robot"]].append(row)
    for rid, name in NAMES.items():
        poses, odoms = topics[f"/{name}/pose"], topics[f"/{name}/odom"]
        assert len(poses) == len(odoms) == len(rows[rid])
        for row, (t, _, pose), (_, _, odom) in zip(rows[rid], poses, odoms, strict=True):
            assert t == row["t_ns"]
            assert pose["frame_id"] == "map"
            assert pose["pose"]["position"] == {"x": row["x"], "y": row["y"], "z": 0.0}
            assert pose["pose"]["orientation"] == {"x": 0.0, "y": 0.0, "z": math.sin(0.5 * row["yaw"]),
                                                   "w": math.cos(0.5 * row["yaw"])}
            assert (odom["frame_id"], odom["child_frame_id"]) == (f"{name}/odom", f"{name}/base_link")
            assert odom["pose"]["position"] == {"x": row["est_x"], "y": row["est_y"], "z": 0.0}
            assert odom["pose"]["orientation"]["z"] == math.sin(0.5 * row["est_yaw"])
            assert odom["twist"]["linear"] == {"x": row["est_v"], "y": 0.0, "z": 0.0}
            assert odom["twist"]["angular"] == {"x": 0.0, "y": 0.0, "z": row["yaw_rate"]}
    if "itsg5" in str(run_dir):  # odometry: the estimate drifts from the truth
        assert any(r["est_x"] != r["x"] for rs in rows.values() for r in rs)
    moved = [p["pose"]["position"]["x"] for _, _, p in topics["/robot0/pose"]]
    assert moved[-1] > moved[0] + 2.0  # the leader drove about 1 m/s for 3 s: not a constant


def test_ranges_equal_the_range_trace(run_dir: Path) -> None:
    _, topics, _ = _read(run_dir / "run.mcap")
    rows = defaultdict(list)
    for row in _table(run_dir, "range"):
        rows[row["robot"]].append(row)
    seen_target = 0
    for rid, name in NAMES.items():
        for row, (t, _, message) in zip(rows[rid], topics[f"/{name}/range"], strict=True):
            assert t == row["t_ns"]
            assert message["frame_id"] == f"{name}/base_link"
            assert message.get("range_m") == _num(row["range_m"])  # no target: the field is left out
            assert message.get("range_rate_mps") == _num(row["range_rate_mps"])
            assert message.get("bearing_rad") == _num(row["bearing_rad"])
            assert ("range_m" in message) == (row["target"] >= 0)
            assert message["target_id"] == row["target"]
            assert message["target"] == NAMES.get(row["target"], "")
            seen_target += row["target"] > 0
    assert seen_target > 0


def test_receptions_equal_the_cam_rx_trace(run_dir: Path) -> None:
    _, topics, _ = _read(run_dir / "run.mcap")
    rows = _table(run_dir, "cam_rx")
    assert len(rows) == len(topics["/v2x/received"])
    for row, (t, _, message) in zip(rows, topics["/v2x/received"], strict=True):
        assert t == row["t_ns"]
        assert (message["sender_id"], message["receiver_id"]) == (row["sender"], row["receiver"])
        assert (message["sender"], message["receiver"]) == (NAMES[row["sender"]], NAMES[row["receiver"]])
        assert (_ns(message["generated"]), _ns(message["received"])) == (row["generated_ns"], row["received_ns"])
        assert message["latency_s"] == (row["received_ns"] - row["generated_ns"]) / 1e9
        assert message["decoded"] == {k: row[k] for k in messages.DECODED_FIELDS
                                      if k in row and not math.isnan(row[k])}
        assert message["decoded"].keys() >= {"x", "y", "yaw", "v", "a", "yaw_rate"}


def test_scene_has_a_box_and_a_label_per_robot_coloured_by_platoon(run_dir: Path) -> None:
    _, topics, _ = _read(run_dir / "run.mcap")
    ((t, _, scene),) = topics["/scene"]
    assert t == 0 and scene["deletions"] == []
    by_name = {e["id"]: e for e in scene["entities"]}
    assert list(by_name) == list(NAMES.values())
    platoon_of = {}
    for entity in scene["entities"]:
        assert entity["frame_id"] == f"{entity['id']}/base_link" and entity["frame_locked"] is True
        (cube,) = entity["cubes"]
        (text,) = entity["texts"]
        # auna_rc_1to10: 0.49 m x 0.18 m, rear bumper 0.085 m behind the rear axle
        assert (cube["size"]["x"], cube["size"]["y"]) == (0.49, 0.18)
        assert cube["pose"]["position"]["x"] == pytest.approx(0.49 / 2 - 0.085, abs=1e-15)
        assert text["text"] == entity["id"]
        meta = {kv["key"]: kv["value"] for kv in entity["metadata"]}
        platoon_of[entity["id"]] = (meta["platoon"], tuple(cube["color"][c] for c in "rgb"))
    colours = {platoon: colour for platoon, colour in platoon_of.values()}
    assert len(colours) == len({p for p, _ in platoon_of.values()})  # one colour per platoon ...
    assert len(set(colours.values())) == len(colours)  # ... and different platoons, different colours
    if "itsg5" in str(run_dir):
        assert len(colours) == 2


def test_transforms_chain_map_odom_base_link_to_the_true_pose(run_dir: Path) -> None:
    _, topics, _ = _read(run_dir / "run.mcap")
    truth = {(r["t_ns"], r["robot"]): r for r in _table(run_dir, "vehicles")}
    drift = 0.0
    for t, _, message in topics["/tf"][::50]:
        frames = {(tf["parent_frame_id"], tf["child_frame_id"]): tf for tf in message["transforms"]}
        assert len(frames) == 2 * len(NAMES)
        for rid, name in NAMES.items():
            mo, ob = frames[("map", f"{name}/odom")], frames[(f"{name}/odom", f"{name}/base_link")]
            x, y, yaw = _compose(_planar(mo), _planar(ob))
            row = truth[(t, rid)]
            assert (x, y) == pytest.approx((row["x"], row["y"]), abs=1e-12)
            assert math.remainder(yaw - row["yaw"], math.tau) == pytest.approx(0.0, abs=1e-12)
            drift += abs(mo["translation"]["x"]) + abs(mo["translation"]["y"])
    assert (drift > 0) == ("itsg5" in str(run_dir))  # only the odometry run needs a correction


def _planar(tf: dict[str, Any]) -> tuple[float, float, float]:
    q = tf["rotation"]
    return tf["translation"]["x"], tf["translation"]["y"], 2.0 * math.atan2(q["z"], q["w"])


def _compose(a: tuple[float, float, float], b: tuple[float, float, float]) -> tuple[float, float, float]:
    c, s = math.cos(a[2]), math.sin(a[2])
    return a[0] + c * b[0] - s * b[1], a[1] + s * b[0] + c * b[1], a[2] + b[2]


def test_map_to_odom_absorbs_the_estimate_drift() -> None:
    truth, estimate = (3.0, -1.0, 0.7), (2.6, -0.8, 0.55)
    x, y, yaw = _compose(messages.map_to_odom(truth, estimate), estimate)
    assert (x, y, yaw) == pytest.approx(truth, abs=1e-12)
    assert messages.map_to_odom(truth, truth) == pytest.approx((0.0, 0.0, 0.0), abs=1e-15)
    # no finite estimate: odom = map, base_link at the truth
    tf = messages.transforms(5, [("r", truth, (math.nan, 0.0, 0.0))])["transforms"]
    assert tf[0]["translation"] == {"x": 0.0, "y": 0.0, "z": 0.0}
    assert (tf[1]["translation"]["x"], tf[1]["translation"]["y"]) == (3.0, -1.0)


def test_the_mcap_command_on_scenario_and_traces_alone_writes_the_same_bytes(run_dir: Path, tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(run_dir / "scenario.resolved.yaml", copy)
    shutil.copytree(run_dir / "trace", copy / "trace")
    assert main(["mcap", str(copy)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert (copy / "run.mcap").read_bytes() == (run_dir / "run.mcap").read_bytes()
    assert not list(copy.glob("*.partial"))


def test_small_batches_give_the_same_file(run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Instants straddle batch boundaries when a batch holds 7 rows (4 robots per instant): still the same bytes."""
    monkeypatch.setattr(sources, "BATCH_ROWS", 7)
    write_mcap(run_dir, tmp_path / "small.mcap")
    assert (tmp_path / "small.mcap").read_bytes() == (run_dir / "run.mcap").read_bytes()


def test_without_cam_rx_receptions_come_from_the_channel_log(run_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "old"
    shutil.copytree(run_dir / "trace", copy / "trace", ignore=shutil.ignore_patterns("cam_rx.parquet"))
    shutil.copy(run_dir / "scenario.resolved.yaml", copy)
    summary = write_mcap(copy)
    assert summary.receptions_from == "v2x"
    _, topics, _ = _read(copy / "run.mcap")
    received = sorted((r["t_ns"], r["sender"], r["receiver"], r["generated_ns"]) for r in _table(run_dir, "v2x")
                      if r["event"] == "rx" and r["outcome"] == "received")
    got = [(t, m["sender_id"], m["receiver_id"], _ns(m["generated"])) for t, _, m in topics["/v2x/received"]]
    assert sorted(got) == received and [g[0] for g in got] == sorted(g[0] for g in got)
    assert all("decoded" not in m for _, _, m in topics["/v2x/received"])


def test_outputs_mcap_false_writes_no_file_and_records_no_cam_rx(tmp_path: Path) -> None:
    _run(tmp_path / "run")
    assert not (tmp_path / "run" / "run.mcap").exists()
    assert not (tmp_path / "run" / "trace" / "cam_rx.parquet").exists()
    assert (tmp_path / "run" / "trace" / "vehicles.parquet").exists()


def test_a_missing_mcap_package_is_a_validation_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "mcap", None)  # `import mcap` now raises ImportError
    monkeypatch.setitem(sys.modules, "mcap.writer", None)
    out = tmp_path / "run"
    assert main(["run", str(PLATOON), "--out", str(out), "--quiet", *SHORT, "--set", "outputs.mcap=true"]) == 2
    err = capsys.readouterr().err
    assert "outputs.mcap" in err and "coopsim[mcap]" in err and "Traceback" not in err
    assert not out.exists()  # refused before anything ran
    assert main(["validate", str(PLATOON), "--set", "outputs.mcap=true"]) == 2
    assert main(["validate", str(PLATOON)]) == 0  # without the flag the package is not needed
    assert main(["mcap", str(tmp_path)]) == 2
    assert "coopsim[mcap]" in capsys.readouterr().err


def test_the_mcap_command_refuses_an_incomplete_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["mcap", str(tmp_path)]) == 2
    assert "scenario.resolved.yaml is missing" in capsys.readouterr().err


def test_a_trace_out_of_time_order_is_named(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    copy = tmp_path / "bad"
    shutil.copytree(run_dir / "trace", copy / "trace")
    shutil.copy(run_dir / "scenario.resolved.yaml", copy)
    table = pq.read_table(copy / "trace" / "range.parquet")
    pq.write_table(table.take(list(range(table.num_rows - 1, -1, -1))), copy / "trace" / "range.parquet")
    assert main(["mcap", str(copy)]) == 2
    err = capsys.readouterr().err
    assert "range.parquet: row 4" in err and "time order" in err
    assert not (copy / "run.mcap").exists() and not list(copy.glob("*.partial"))


@pytest.mark.slow
def test_every_message_fits_its_stored_schema(run_dir: Path) -> None:
    """The schemas stored in the file are valid JSON Schemas and each message of each topic validates against its
    own (first 20 per topic); a schema that says ``number`` where a message writes null would fail here."""
    jsonschema = pytest.importorskip("jsonschema")
    with (run_dir / "run.mcap").open("rb") as f:
        reader = make_reader(f)
        checked: Counter[str] = Counter()
        for schema, channel, message in reader.iter_messages():
            if checked[channel.topic] >= 20:
                continue
            stored = json.loads(schema.data)
            jsonschema.Draft202012Validator.check_schema(stored)
            assert stored["title"] == schema.name
            jsonschema.validate(json.loads(message.data), stored, cls=jsonschema.Draft202012Validator)
            checked[channel.topic] += 1
    assert len(checked) == 3 + 3 * len(NAMES)
    # a message that breaks the schema is refused: the check can fail
    bad = {"timestamp": {"sec": 0, "nsec": 0}, "frame_id": "map", "pose": {"position": {"x": "1"}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, json.loads(schemas.schema_bytes(schemas.POSE_IN_FRAME)))


_FIELD_TYPES = {"boolean", "string", "number", "integer", "object", "array"}


def _walk_like_a_viewer(schema: dict[str, Any], where: str) -> int:
    """The rules a viewer's JSON-schema reader applies when it derives message paths (Lichtblick's
    ``parseJsonSchema``: every object has ``properties``; every field one type of ``_FIELD_TYPES``, array items
    too); returns the number of fields seen."""
    assert schema.get("type") == "object", where
    assert isinstance(schema.get("properties"), dict), f"{where}: an object needs 'properties'"
    seen = 0
    for name, field in schema["properties"].items():
        kind = field.get("type")
        assert isinstance(kind, str) and kind in _FIELD_TYPES, \
            f"{where}.{name}: one type of {sorted(_FIELD_TYPES)}, got {kind!r}"
        seen += 1
        if kind == "object":
            seen += _walk_like_a_viewer(field, f"{where}.{name}")
        elif kind == "array":
            item = field["items"].get("type")
            assert isinstance(item, str) and item in _FIELD_TYPES - {"array"}, f"{where}.{name}[]: got {item!r}"
            if item == "object":
                seen += _walk_like_a_viewer(field["items"], f"{where}.{name}[]")
    return seen


@pytest.mark.parametrize("name", sorted(schemas.SCHEMAS))
def test_each_schema_is_one_a_viewer_can_read(name: str) -> None:
    stored = json.loads(schemas.schema_bytes(name))
    assert stored["title"] == name
    assert _walk_like_a_viewer(stored, name) > 3


def test_the_viewer_rules_refuse_a_nullable_field() -> None:
    with pytest.raises(AssertionError, match="one type"):
        _walk_like_a_viewer({"type": "object", "properties": {"r": {"type": ["number", "null"]}}}, "x")
    with pytest.raises(AssertionError, match="needs 'properties'"):
        _walk_like_a_viewer({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object"}}}},
                            "x")


def test_event_rows_a_little_behind_are_put_in_order_within_the_window() -> None:
    def rec(t: int, tag: str) -> sources.Record:
        return sources.Record(t, "/x", "s", {"tag": tag})

    rows = [rec(10, "a"), rec(8, "b"), rec(10, "c"), rec(25, "d"), rec(21, "e"), rec(40, "f")]
    out = list(sources.in_time_order(iter(rows), window_ns=5))
    assert [(r.t_ns, r.message["tag"]) for r in out] == [(8, "b"), (10, "a"), (10, "c"), (21, "e"), (25, "d"),
                                                         (40, "f")]
    # a row further behind than the window comes out where it arrived (the file stays valid, this one out of order)
    late = list(sources.in_time_order(iter([rec(0, "a"), rec(100, "b"), rec(200, "d"), rec(50, "c")]), window_ns=10))
    assert [r.t_ns for r in late] == [0, 100, 50, 200]


def test_a_despawned_robot_leaves_the_scene_and_the_transforms(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _run(out, "--set", "outputs.mcap=true", "--set", "vehicles.overrides.robot3.despawn_at_s=2.0")
    _, topics, _ = _read(out / "run.mcap")
    scenes = [(t, [e["id"] for e in m["entities"]], m["deletions"]) for t, _, m in topics["/scene"]]
    assert scenes == [(0, ["robot0", "robot1", "robot2", "robot3"], []),
                      (2_000_000_000, ["robot0", "robot1", "robot2"],
                       [{"timestamp": {"sec": 2, "nsec": 0}, "type": 0, "id": "robot3"}])]
    last_pose = topics["/robot3/pose"][-1][0]
    assert last_pose < 2_000_000_000 <= topics["/robot2/pose"][-1][0]
    for t, _, message in topics["/tf"]:
        children = {tf["child_frame_id"] for tf in message["transforms"]}
        assert ("robot3/base_link" in children) == (t <= last_pose)


def test_the_same_scenario_and_seed_run_again_give_the_same_file(run_dir: Path, tmp_path: Path) -> None:
    channel = "itsg5" if "itsg5" in run_dir.parent.name else "ideal"
    _run(tmp_path / "again", *_variant(channel))
    assert (tmp_path / "again" / "run.mcap").read_bytes() == (run_dir / "run.mcap").read_bytes()
