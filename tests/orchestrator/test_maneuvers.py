"""Platoon maneuvers by message on the ideal channel: each completes without a collision and with gaps above a
floor; message loss delays a maneuver or aborts it cleanly after its timeout; bad requests are errors at their
lines; runs are deterministic."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from orchestrator.metrics.rundata import file_digest
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario, parse_scenario

GAP_FLOOR_M = 8.0
"""No two cars in one lane come closer than this while a maneuver runs (the CACC gap at 25 m/s is 17 m)."""

BASE = """
version: 1
name: maneuvers_test
seed: 5
duration_s: {duration}
step_s: 0.01
leader: {{profile: constant, params: {{speed_mps: 25.0}}}}
controller: {{type: ploeg_cacc, period_s: 0.01, time_gap_s: 0.6, standstill_m: 2.0,
             lateral: {{lookahead_m: 2.0, lookahead_time_s: 0.5}}}}
platoons:
  - name: p1
    count: {count}
    template: {{preset: passenger_car}}
  - name: j
    members: [{{name: joiner, vehicle: {{preset: passenger_car}}}}]
    lane_offset_m: 3.5
    start: {{x: {joiner_x}, y: 0.0}}
channel: {{type: ideal, platooning_message: true{outages}}}
physics: {{range_sensor: {{keep_factor: 1.5}}}}  # a radar drops a car one lane over (3.5 m > 1.5 x 1.8 m)
maneuvers: {maneuvers}
outputs: {{plots: false, report: false}}
"""


def scenario_text(maneuvers: str, duration: float = 16.0, count: int = 3, joiner_x: float = -60.0,
                  outages: str = "") -> str:
    return BASE.format(duration=duration, count=count, joiner_x=joiner_x, maneuvers=maneuvers,
                       outages=f", outages: [{outages}]" if outages else "")


def run(tmp_path, name: str, text: str) -> tuple[dict, dict]:
    """Runs a scenario; its metrics.json and maneuver events (names)."""
    out = tmp_path / name
    result = run_scenario(parse_scenario(text), out)
    assert result.ok, result
    metrics = json.loads((out / "metrics.json").read_text())
    events = pq.read_table(out / "trace" / "maneuver_events.parquet").to_pydict()
    return metrics, events


def final_state(tmp_path, name: str) -> dict[str, np.ndarray]:
    """The last row of platoon_state per robot, by robot id."""
    table = pq.read_table(tmp_path / name / "trace" / "platoon_state.parquet").to_pydict()
    robot = np.asarray(table["robot"])
    last = {int(r): np.flatnonzero(robot == r)[-1] for r in np.unique(robot)}
    return {key: {r: table[key][k] for r, k in last.items()} for key in table}


def final_pose(tmp_path, name: str, robot: int) -> tuple[float, float]:
    table = pq.read_table(tmp_path / name / "trace" / "vehicles.parquet", columns=["robot", "x", "y"]).to_pydict()
    rows = np.flatnonzero(np.asarray(table["robot"]) == robot)
    return table["x"][rows[-1]], table["y"][rows[-1]]


def check_completed(metrics: dict, within_s: float) -> dict:
    """The single request completed within ``within_s`` with no collision and gaps above the floor."""
    assert metrics["run"]["collisions"] == 0
    entry = metrics["maneuvers"]["requests"][0]
    assert entry["status"] == "completed", entry
    assert 0.0 < entry["time_to_complete_s"] < within_s
    assert entry["min_gap_m"] > GAP_FLOOR_M
    return entry


@pytest.mark.slow
def test_join_at_the_tail(tmp_path):
    metrics, events = run(tmp_path, "tail", scenario_text("[{at_s: 1, type: join, robot: joiner, platoon: p1}]"))
    check_completed(metrics, within_s=12.0)
    assert events["event"] == ["requested", "accepted", "lane_change", "completed"]
    state = final_state(tmp_path, "tail")
    assert state["predecessor"][4] == 3 and state["leader"][4] == 1  # behind the old tail, led by p1's leader
    assert state["platoon_id"][4] == 0 and state["platoon_index"][4] == 3
    assert abs(final_pose(tmp_path, "tail", 4)[1]) < 0.1  # in the platoon's lane (y = 0), not beside it


@pytest.mark.slow
def test_join_in_the_middle_opens_a_gap(tmp_path):
    metrics, events = run(tmp_path, "middle", scenario_text(
        "[{at_s: 1, type: join, robot: joiner, platoon: p1, position: 1}]", joiner_x=-25.0))
    check_completed(metrics, within_s=15.0)
    order = list(zip(events["robot"], events["event"], strict=True))
    assert order == [(4, "requested"), (1, "accepted"), (2, "gap_opening"), (2, "gap_open"), (4, "lane_change"),
                     (4, "completed")]
    t = dict(zip(events["event"], np.asarray(events["t_ns"]) / 1e9, strict=False))
    assert t["lane_change"] >= t["gap_open"]  # the joiner moves over only once the gap is open
    # the joiner keeps to its lane until the gap is open, then moves over smoothly (no jump)
    table = pq.read_table(tmp_path / "middle" / "trace" / "vehicles.parquet", columns=["t_s", "robot", "y"])
    rows = np.asarray(table["robot"]) == 4
    t_s, y = np.asarray(table["t_s"])[rows], np.asarray(table["y"])[rows]
    assert np.all(np.abs(y[t_s <= t["lane_change"]] - 3.5) < 0.01)
    assert np.max(np.abs(np.diff(y))) < 0.025  # at most 2.5 m/s sideways (the 4 s quintic peaks at 1.6 m/s)
    assert abs(y[-1]) < 0.1
    state = final_state(tmp_path, "middle")
    assert state["predecessor"][4] == 1 and state["predecessor"][2] == 4  # p1_1 now follows the joiner
    assert [state["platoon_index"][r] for r in (1, 4, 2, 3)] == [0, 1, 2, 3]


@pytest.mark.slow
def test_leave(tmp_path):
    metrics, _ = run(tmp_path, "leave", scenario_text("[{at_s: 1, type: leave, robot: p1_1}]", duration=24.0,
                                                           joiner_x=-300.0))
    check_completed(metrics, within_s=14.0)
    state = final_state(tmp_path, "leave")
    assert state["predecessor"][3] == 1  # the vehicle behind follows the leaver's predecessor
    assert np.isnan(state["predecessor"][2]) and state["platoon_index"][3] == 1
    _, y = final_pose(tmp_path, "leave", 2)
    assert y == pytest.approx(-3.6, abs=0.1)  # two car widths (1.8 m) to the right: the next lane
    x1, _ = final_pose(tmp_path, "leave", 1)
    x3, _ = final_pose(tmp_path, "leave", 3)
    assert x1 - x3 < 30.0  # the gap closed to about one slot (21.5 m; with the leaver's slot it was 45 m and more)


@pytest.mark.slow
def test_split_then_merge(tmp_path):
    metrics, _ = run(tmp_path, "split_merge", scenario_text(
        "[{at_s: 1, type: split, platoon: p1, position: 2, name: rear}, {at_s: 11, type: merge, platoon: rear, "
        "into: p1}]", duration=20.0, count=4, joiner_x=-300.0))
    assert metrics["run"]["collisions"] == 0
    split, merge = metrics["maneuvers"]["requests"]
    assert split["status"] == merge["status"] == "completed"
    assert split["min_gap_m"] > GAP_FLOOR_M and merge["min_gap_m"] > GAP_FLOOR_M
    state = final_state(tmp_path, "split_merge")
    assert state["leader"][4] == 1 and state["leader"][3] == 1  # the rear platoon's robots are led by p1_0 again
    assert [state["platoon_id"][r] for r in (1, 2, 3, 4)] == [0, 0, 0, 0]


def test_split_keeps_the_larger_gap(tmp_path):
    run(tmp_path, "split", scenario_text("[{at_s: 1, type: split, platoon: p1, position: 2}]",
                                                      duration=10.0, count=4, joiner_x=-300.0))
    state = final_state(tmp_path, "split")
    assert state["leader"][4] == 3 and state["platoon_index"][4] == 1  # p1_3 follows the new leader p1_2
    assert state["platoon_id"][3] == state["platoon_id"][4] == 2 + 0  # a new platoon: 2 platoons + request 0
    x2, _ = final_pose(tmp_path, "split", 2)
    x3, _ = final_pose(tmp_path, "split", 3)
    assert x2 - x3 > 21.5 + 15.0  # 1 s more time gap at 25 m/s, most of it reached 3 s after the ramp


def test_outage_during_the_request_aborts_cleanly(tmp_path):
    metrics, _ = run(tmp_path, "lost", scenario_text(
        "[{at_s: 1, type: join, robot: joiner, platoon: p1, position: 1}]", duration=10.0,
        outages="{start_s: 0.5, end_s: 9.0}"))
    assert metrics["run"]["collisions"] == 0
    entry = metrics["maneuvers"]["requests"][0]
    assert entry["status"] == "aborted"
    reasons = {(a["robot"], a["state"], a["reason"]) for a in entry["aborts"]}
    assert ("joiner", "join_request", "timeout") in reasons  # after reply_timeout_s without an answer
    aborted_at = min(a["t_s"] for a in entry["aborts"] if a["robot"] == "joiner")
    assert aborted_at == pytest.approx(4.0, abs=0.02)
    assert final_pose(tmp_path, "lost", 4)[1] == pytest.approx(3.5, abs=0.01)  # it never left its lane


@pytest.mark.slow
def test_short_outage_delays_the_join(tmp_path):
    text = "[{at_s: 1, type: join, robot: joiner, platoon: p1}]"
    clean, _ = run(tmp_path, "clean", scenario_text(text))
    late, events = run(tmp_path, "late", scenario_text(text, outages="{start_s: 0.5, end_s: 2.5}"))
    accepted = np.asarray(events["t_ns"])[events["event"].index("accepted")] / 1e9
    assert accepted >= 2.5  # the request is heard only when the channel is back
    t_clean = check_completed(clean, within_s=12.0)["time_to_complete_s"]
    t_late = check_completed(late, within_s=14.0)["time_to_complete_s"]
    assert t_late > t_clean + 1.0


@pytest.mark.slow
def test_runs_are_deterministic(tmp_path):
    text = scenario_text("[{at_s: 1, type: join, robot: joiner, platoon: p1, position: 1}]", duration=6.0)
    digests = []
    for name in ("a", "b"):
        run(tmp_path, name, text)
        digests.append(json.loads((tmp_path / name / "run.json").read_text())["digest"])
    assert digests[0] == digests[1]
    traces = [file_digest(tmp_path / n, ["platoon_state", "maneuver_events"]) for n in ("a", "b")]
    assert traces[0] == traces[1]


@pytest.mark.parametrize(("request_text", "line", "message"), [
    ("{at_s: 1, type: join, robot: nobody, platoon: p1}", "maneuvers[0].robot", "no robot named 'nobody'"),
    ("{at_s: 1, type: join, robot: joiner, platoon: p1, position: 7}", "maneuvers[0].position",
     "a joiner's position is 1 .. 3"),
    ("{at_s: 99, type: leave, robot: p1_1}", "maneuvers[0].at_s", "must be before the end of the run"),
    ("{at_s: 1, type: split, platoon: p7, position: 1}", "maneuvers[0].platoon", "no platoon named 'p7'"),
    ("{at_s: 1, type: leave, robot: p1_0}", "maneuvers[0].robot", "a leader leaves by a split at 1"),
    ("{at_s: 1, type: merge, platoon: p1}", "maneuvers[0]", "a merge needs 'into'"),
])
def test_bad_requests_are_errors_at_their_lines(tmp_path, request_text, line, message):
    path = tmp_path / "bad.yaml"
    path.write_text(scenario_text(f"\n  - {request_text}"))
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "validate", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lineno = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if request_text in text)
    assert f"bad.yaml:{lineno}: {line}" in done.stderr
    assert message in done.stderr


@pytest.mark.slow
def test_the_resolved_scenario_reruns_the_maneuvers(tmp_path):
    first = run_scenario(parse_scenario(scenario_text("[{at_s: 1, type: join, robot: joiner, platoon: p1}]",
                                                      duration=5.0)), tmp_path / "first")
    resolved = tmp_path / "first" / "scenario.resolved.yaml"
    data = yaml.safe_load(resolved.read_text())
    assert data["maneuvers"][0]["type"] == "join" and data["maneuvers"][0]["position"] is None
    assert data["maneuver_settings"]["reply_timeout_s"] == 3.0  # the timing the run used, written out in full
    again = run_scenario(load_scenario(resolved), tmp_path / "again")
    assert again.run_info["digest"] == first.run_info["digest"]


CROWD = """
  - name: crowd                         # 30 cars two lanes over, sending CAMs and platooning messages at 100 Hz
    count: 30
    template: {preset: passenger_car}
    lane_offset_m: -7.0
    start: {x: 30.0, y: 0.0}
"""


@pytest.mark.slow
def test_itsg5_at_high_load_completes_later_or_aborts_cleanly(tmp_path):
    text = scenario_text("[{at_s: 1, type: join, robot: joiner, platoon: p1, position: 1}]", joiner_x=-25.0)
    quiet = text.replace("channel: {type: ideal, platooning_message: true}",
                         "channel: {type: itsg5, platooning_message: {rate_hz: 10}, pcap: false}")
    loaded = text.replace("channel: {type: ideal, platooning_message: true}", CROWD + (
        "channel: {type: itsg5, platooning_message: {rate_hz: 100}, pcap: false, security_bytes: 1500,\n"
        "          generation: {mode: fixed_rate, fixed_rate_hz: 100}}"))
    calm, _ = run(tmp_path, "quiet", quiet)
    busy, _ = run(tmp_path, "loaded", loaded)
    t_calm = check_completed(calm, within_s=15.0)["time_to_complete_s"]
    assert busy["channel"]["pdr_interest"] < 0.7 < calm["channel"]["pdr_interest"]  # the load shows
    assert busy["run"]["collisions"] == 0
    entry = busy["maneuvers"]["requests"][0]
    assert entry["min_gap_m"] > GAP_FLOOR_M
    if entry["status"] == "completed":
        assert entry["time_to_complete_s"] > t_calm
    else:
        assert entry["status"] == "aborted" and entry["aborts"]
        assert all(a["reason"] in ("timeout", "partner_aborted") for a in entry["aborts"])


@pytest.mark.slow
def test_an_outage_during_the_move_aborts_every_partner_and_the_gap_closes(tmp_path):
    text = scenario_text("[{at_s: 1, type: join, robot: joiner, platoon: p1, position: 1}]", duration=38.0,
                         joiner_x=-25.0, outages="{start_s: 2.0, end_s: 100.0}")
    text += "maneuver_settings: {move_timeout_s: 5.0}\n"
    metrics, events = run(tmp_path, "cut", text)
    assert metrics["run"]["collisions"] == 0
    entry = metrics["maneuvers"]["requests"][0]
    assert entry["status"] == "aborted" and entry["min_gap_m"] > GAP_FLOOR_M
    aborts = {a["robot"]: (a["state"], a["reason"], a["t_s"]) for a in entry["aborts"]}
    # nobody hears anyone: each gives up on its own timeout (joiner 5 s after join_move, the opener once its wait
    # for "joined" is over, the leader after the whole maneuver's time)
    assert aborts["joiner"][:2] == ("join_move", "timeout") and aborts["joiner"][2] == pytest.approx(6.02, abs=0.03)
    assert aborts["p1_1"][:2] == ("gap_open", "timeout")
    assert aborts["p1_0"][:2] == ("accept", "timeout")
    # safe states: the joiner never left its lane, the opened gap closed again
    assert final_pose(tmp_path, "cut", 4)[1] == pytest.approx(3.5, abs=0.01)
    x0, _ = final_pose(tmp_path, "cut", 1)
    x1, _ = final_pose(tmp_path, "cut", 2)
    assert x0 - x1 == pytest.approx(21.5, abs=1.5)  # the CACC distance again (it was 43 m with the gap open)
    assert "lane_change" not in events["event"]
