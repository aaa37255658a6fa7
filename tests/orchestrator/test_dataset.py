"""``coopsim dataset``: from a run of the shipped scenarios/attacks_platoon.yaml (its falsified desired acceleration
and a constant position offset beside it), one file per receiver with exactly its receptions in trace/v2x.parquet,
labels that are the attack windows, forged positions that are the true ones plus the offset, and a run directory
that cannot give a data set refused with exit code 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIO = "scenarios/attacks_platoon.yaml"
ATTACKS = ("[{robot: car2, type: desired_accel_constant, params: {u_mps2: 4.0}, from_s: 2, to_s: 5},"
           " {robot: car4, type: constant_offset, params: {dx_m: 5.0}, from_s: 3, to_s: 6}]")
NAMES = {1: "car0", 2: "car1", 3: "car2", 4: "car3", 5: "car4", 6: "car5"}

pytestmark = pytest.mark.slow  # one ~8 s run


def coopsim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dataset") / "run"
    done = coopsim("run", SCENARIO, "--out", str(out), "--quiet", "--set", "duration_s=8", "--set",
                   "outputs.plots=false", "--set", "outputs.report=false", "--set", f"attacks={ATTACKS}")
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def dataset(run: Path) -> Path:
    done = coopsim("dataset", str(run), "--format", "parquet")
    assert done.returncode == 0, done.stderr[-3000:]
    return run / "dataset"


def rows(dataset: Path, receiver: str) -> dict[str, np.ndarray]:
    table = pq.read_table(dataset / "receivers" / f"{receiver}.parquet")
    return {c: np.asarray(table.column(c).to_pylist()) for c in table.column_names}


def test_one_file_per_receiver_with_its_receptions(run: Path, dataset: Path) -> None:
    v2x = pq.read_table(run / "trace" / "v2x.parquet").to_pydict()
    received = Counter(r for r, e, o in zip(v2x["receiver"], v2x["event"], v2x["outcome"], strict=True)
                       if e == "rx" and o == "received")
    files = sorted(p.stem for p in (dataset / "receivers").iterdir())
    assert files == sorted(NAMES[r] for r in received)
    for rid, count in received.items():
        got = rows(dataset, NAMES[rid])
        assert len(got["rcv_time_ns"]) == count
        assert (got["receiver"] == rid).all() and (np.diff(got["rcv_time_ns"]) >= 0).all()
    meta = json.loads((dataset / "run.json").read_text())
    assert meta["receivers"] == {NAMES[r]: n for r, n in received.items()}
    assert [a["type"] for a in meta["attacks"]] == ["desired_accel_constant", "constant_offset"]


def test_labels_are_the_attack_windows(dataset: Path) -> None:
    for name, (label, sender, message, start, end) in {"car3": (1, 3, "pm", 2.0, 5.0),
                                                        "car5": (2, 5, "cam", 3.0, 6.0)}.items():
        got = rows(dataset, name)
        send_s = got["send_time_ns"] / 1e9
        inside = (got["sender"] == sender) & (got["message"] == message) & (send_s >= start) & (send_s < end)
        assert inside.sum() >= 10
        np.testing.assert_array_equal(got["attack"] == label, inside)
        assert set(got["attack_type"][inside]) == {["desired_accel_constant", "constant_offset"][label - 1]}
        assert set(got["attack_type"][~inside]) <= {"none", "desired_accel_constant", "constant_offset"}


def test_claimed_minus_true_is_the_offset(dataset: Path) -> None:
    got = rows(dataset, "car5")  # car4's follower
    cam = (got["sender"] == 5) & (got["message"] == "cam")
    forged = cam & (got["attack"] == 2)
    dx = got["pos_x_m"] - got["true_pos_x_m"]
    dy = got["pos_y_m"] - got["true_pos_y_m"]
    # the estimate is perfect here: what is left is the CAM's 1e-7 degree quantisation (~1 cm)
    np.testing.assert_allclose(dx[forged], 5.0, atol=0.015)
    np.testing.assert_allclose(dy[forged], 0.0, atol=0.015)
    np.testing.assert_allclose(dx[cam & ~forged], 0.0, atol=0.015)
    np.testing.assert_allclose(got["speed_mps"][cam] - got["true_speed_mps"][cam], 0.0, atol=0.006)  # 0.01 m/s
    pm = rows(dataset, "car3")
    forged_pm = pm["attack"] == 1
    np.testing.assert_allclose(pm["desired_accel_mps2"][forged_pm], 4.0)
    assert np.isnan(pm["pos_x_m"][pm["message"] == "pm"]).all()  # a PM claims no position
    assert (pm["verdict"][forged_pm & pm["delivered"]] == "misbehaving").all()  # the detector's verdicts ride along
    assert pm["fail_desired_accel"][forged_pm & pm["delivered"]].all()


def test_the_ground_truth_holds_every_transmission(run: Path, dataset: Path) -> None:
    truth = pq.read_table(dataset / "ground_truth.parquet").to_pydict()
    v2x = pq.read_table(run / "trace" / "v2x.parquet").to_pydict()
    assert len(truth["send_time_ns"]) == sum(e == "tx" for e in v2x["event"])
    label = np.array(truth["attack"])
    assert Counter(label[label > 0].tolist()) == Counter(a for a, e in zip(v2x["attack"], v2x["event"], strict=True)
                                                         if e == "tx" and a > 0)


def test_jsonl_has_the_same_rows(run: Path, dataset: Path, tmp_path: Path) -> None:
    done = coopsim("dataset", str(run), "--out", str(tmp_path / "jl"))
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "jl" / "receivers" / "car5.jsonl").read_text().splitlines()
    parquet = rows(dataset, "car5")
    assert len(lines) == len(parquet["rcv_time_ns"])
    first = json.loads(lines[0])
    assert first["rcv_time_ns"] == parquet["rcv_time_ns"][0] and first["desired_accel_mps2"] is None


def test_a_bad_run_directory_is_refused(run: Path, tmp_path: Path) -> None:
    done = coopsim("dataset", str(tmp_path / "nothing"))
    assert done.returncode == 2 and "is not a directory" in done.stderr and "Traceback" not in done.stderr
    partial = tmp_path / "partial"
    shutil.copytree(run, partial, ignore=shutil.ignore_patterns("dataset", "misbehaviour.parquet"))
    done = coopsim("dataset", str(partial))
    assert done.returncode == 2 and "misbehaviour.parquet is missing" in done.stderr
    assert "attacks:" in done.stderr and "Traceback" not in done.stderr
    (partial / "scenario.resolved.yaml").write_text("version: 1\nname: [unclosed\n")
    done = coopsim("dataset", str(partial))
    assert done.returncode == 2 and "scenario.resolved.yaml" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("name", ["../../outside", "a/b", "..", "a\\b"])
def test_a_receiver_name_from_an_older_run_never_leaves_the_data_set(tmp_path: Path, name: str) -> None:
    from orchestrator.reporting.dataset import _receiver_file

    assert _receiver_file(tmp_path, name, 7, "jsonl") == tmp_path / "receivers" / "robot7.jsonl"
    assert _receiver_file(tmp_path, "car.1", 7, "jsonl") == tmp_path / "receivers" / "car.1.jsonl"
