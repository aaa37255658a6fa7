"""scenarios/attacks_highway.yaml, shortened to its first two attacks (a position offset from car_2, a speed offset
from car_4): SUMO's traffic and the platoon hear each other, every reception is judged, and ``coopsim dataset``
turns the run into a labelled data set with a file for every receiver, SUMO's vehicles included."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
SUMO_IDS = 1_000_000  # the sumo federate's id_base

pytest.importorskip("libsumo")
pytestmark = [pytest.mark.slow, pytest.mark.external]  # SUMO (the sumo extra); one ~20 s run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("attacks_highway") / "run"
    for args in (["run", "scenarios/attacks_highway.yaml", "--out", str(out), "--quiet", "--set", "duration_s=22",
                  "--set", "outputs.report=false"], ["dataset", str(out), "--format", "parquet"]):
        done = subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_every_receiver_has_its_labelled_receptions(run: Path) -> None:
    v2x = pq.read_table(run / "trace" / "v2x.parquet", columns=["receiver", "event", "outcome"]).to_pydict()
    received = Counter(r for r, e, o in zip(v2x["receiver"], v2x["event"], v2x["outcome"], strict=True)
                       if e == "rx" and o == "received")
    meta = json.loads((run / "dataset" / "run.json").read_text())
    names = {int(k): v for k, v in meta["robots"].items()}
    assert sum(rid >= SUMO_IDS for rid in received) >= 5  # SUMO's vehicles receive (channel deliver: all)
    rows = {}
    for rid, count in received.items():
        table = pq.read_table(run / "dataset" / "receivers" / f"{names[rid]}.parquet")
        assert table.num_rows == count
        rows[rid] = table.to_pydict()
    label = np.concatenate([r["attack"] for r in rows.values()])
    sender = np.concatenate([r["sender"] for r in rows.values()])
    send_s = np.concatenate([r["send_time_ns"] for r in rows.values()]) / 1e9
    for k, (robot, start, end) in enumerate([(3, 5.0, 15.0), (5, 15.0, 25.0)], start=1):  # car_2, car_4
        mine = label == k
        assert mine.sum() > 200 and (sender[mine] == robot).all()
        assert start <= send_s[mine].min() and send_s[mine].max() < end
    assert (label[sender >= SUMO_IDS] == 0).all()
    assert set(np.concatenate([r["attack_type"] for r in rows.values()])) == {"none", "constant_offset",
                                                                              "speed_offset"}


def test_the_offset_and_the_detectors_are_in_the_data_set(run: Path) -> None:
    follower = pq.read_table(run / "dataset" / "receivers" / "car_3.parquet").to_pydict()  # behind car_2
    col = {k: np.asarray(v) for k, v in follower.items()}
    forged = col["attack"] == 1
    np.testing.assert_allclose(col["pos_x_m"][forged] - col["true_pos_x_m"][forged], 5.0, atol=0.015)
    assert col["fail_sensor_overlap"][forged].mean() > 0.9  # its radar sees car_2 5 m nearer than claimed
    speed = col["attack"] == 2
    if speed.any():  # car_3 hears car_4 only when it is in range and delivered all
        np.testing.assert_allclose(col["speed_mps"][speed] - col["true_speed_mps"][speed], 2.0, atol=0.006)
    metrics = json.loads((run / "metrics.json").read_text())["misbehaviour"]
    assert metrics["attacks"][1]["recall"] > 0.5  # the Kalman residuals catch the speed offset
    assert metrics["false_positive_rate"] < 0.005
