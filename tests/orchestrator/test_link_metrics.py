"""Link metrics count only what a link could carry: the CAMs its sender sent while both ends existed."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq

from core.robots import RobotSpec
from orchestrator.metrics.links import LinkIndex
from orchestrator.metrics.roles import NONE, build_roles
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

from .test_resolved import REPO

JOIN_S = 3.0


def test_a_late_joiners_pdr_counts_only_the_cams_sent_after_it_appeared(tmp_path):
    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", [
        "duration_s=8", "vehicles.count=3", "platoon.size=3", "channel.type=itsg5", "outputs.plots=false",
        "outputs.report=false", f"vehicles.overrides={{robot2: {{spawn_at_s: {JOIN_S}}}}}"])
    result = run_scenario(scenario, tmp_path / "run")
    assert result.ok, result.error
    follower = json.loads((tmp_path / "run" / "metrics.json").read_text())["followers"]["robot2"]
    v2x = pq.read_table(tmp_path / "run" / "trace" / "v2x.parquet").to_pydict()
    event, outcome = np.asarray(v2x["event"]), np.asarray(v2x["outcome"])
    sender, receiver, t_ns = (np.asarray(v2x[k]) for k in ("sender", "receiver", "t_ns"))
    # robot2 (id 3) follows robot1 (id 2); robot1 sent CAMs from t = 0, robot2 heard them only from JOIN_S
    from_pred = (event == "tx") & (outcome == "sent") & (sender == 2)
    heard = np.count_nonzero((event == "rx") & (outcome == "received") & (sender == 2) & (receiver == 3))
    while_there = np.count_nonzero(from_pred & (t_ns >= JOIN_S * 1e9))
    assert np.count_nonzero(from_pred) > while_there > 0  # the predecessor did send before the joiner came
    assert follower["pdr"] == heard / while_there
    # 1:10 robots a metre apart: every CAM sent while both were there arrives; the old count said ~0.6
    assert follower["pdr"] > 0.97
    assert heard / np.count_nonzero(from_pred) < 0.7


def test_the_window_is_where_both_ends_exist():
    b = RobotSpec(id=2, name="b", spawn_ns=2, despawn_ns=9)
    a = RobotSpec(id=1, name="a", spawn_ns=5, despawn_ns=None, predecessor=2, position_in_platoon=1)
    roles = build_roles([b, a], end_ns=20, platoon_state=None)
    assert roles.link_windows(1) == [(2, 5, 9)]  # a follows b only while both exist
    rows = roles.rows_of(1)
    assert roles.predecessor[rows].tolist() == [2, NONE] and roles.to_ns[rows].tolist() == [9, 20]
    v2x = {"event": np.array(["tx"] * 4 + ["rx"]), "outcome": np.array(["sent"] * 3 + ["dcc_dropped", "received"]),
           "sender": np.array([2, 2, 2, 2, 2]), "receiver": np.array([-1, -1, -1, -1, 1]),
           "t_ns": np.array([1, 5, 9, 6, 6]), "generated_ns": np.array([1, 5, 9, 6, 6]),
           "latency_s": np.array([0, 0, 0, 0, 0.001])}
    links = LinkIndex(v2x)
    assert links.sent(2) == 3 and links.sent(2, (5, 9)) == 1 and links.sent(2, (5, None)) == 2
    assert links.metrics(receiver=1, sender=2, window_ns=(5, 9))["pdr"] == 1.0


def test_platooning_messages_are_marked_in_the_log_and_kept_out_of_the_cam_link_metrics(tmp_path):
    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", [
        "duration_s=5", "vehicles.count=3", "platoon.size=3", "channel.type=itsg5",
        "channel.platooning_message={rate_hz: 10}", "outputs.plots=false", "outputs.report=false"])
    assert run_scenario(scenario, tmp_path / "run").ok
    v2x = pq.read_table(tmp_path / "run" / "trace" / "v2x.parquet").to_pydict()
    message, event, outcome = (np.asarray(v2x[k]) for k in ("message", "event", "outcome"))
    sender, receiver = np.asarray(v2x["sender"]), np.asarray(v2x["receiver"])
    pm_sent = np.count_nonzero((message == "pm") & (event == "tx") & (outcome == "sent"))
    assert pm_sent >= 3 * 4 * 10  # 3 stations, 10 Hz, from their first CAM on
    cam = message == "cam"
    heard = np.count_nonzero(cam & (event == "rx") & (outcome == "received") & (sender == 1) & (receiver == 2))
    sent = np.count_nonzero(cam & (event == "tx") & (outcome == "sent") & (sender == 1))
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["followers"]["robot1"]["pdr"] == heard / sent
    assert metrics["channel"]["pms_sent"] == pm_sent
    assert metrics["channel"]["cams_sent"] == np.count_nonzero(cam & (event == "tx") & (outcome == "sent"))
