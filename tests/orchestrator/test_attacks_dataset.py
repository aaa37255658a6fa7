"""scenarios/attacks_dataset.yaml: a platoon under each attack on messages in turn gives a labelled data set with
every type in it: ``coopsim dataset`` finds each attack's forged messages in the receivers' files, labelled with
its entry and type and received within its window only, every other reception honest, and the ground truth holds
each attack's transmissions."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from comms_models.attacks import ATTACKS

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "scenarios" / "attacks_dataset.yaml"
LATE_S = 0.2  # a reception may end this long after its window (queue, air, receive processing)

pytestmark = pytest.mark.slow  # one 68 s run, ~20 s of CPU


def coopsim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=1200)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("attacks_dataset") / "run"
    done = coopsim("run", str(SCENARIO), "--out", str(out), "--quiet", "--set", "outputs.report=false")
    assert done.returncode == 0, done.stderr[-3000:]
    done = coopsim("dataset", str(out), "--format", "parquet")
    assert done.returncode == 0, done.stderr[-3000:]
    return out / "dataset"


def receptions(dataset: Path) -> dict[str, np.ndarray]:
    tables = [pq.read_table(p) for p in sorted((dataset / "receivers").glob("*.parquet"))]
    return {c: np.concatenate([np.asarray(t.column(c).to_pylist()) for t in tables]) for c in tables[0].column_names}


def test_the_scenario_runs_every_attack_on_messages_once_in_turn() -> None:
    entries = yaml.safe_load(SCENARIO.read_text())["attacks"]
    on_messages = sorted(n for n in ATTACKS.builtin_names() if ATTACKS.get(n).message != "air")
    assert sorted(e["type"] for e in entries) == on_messages
    windows = [(e["from_s"], e["to_s"]) for e in entries]
    assert all(a[1] < b[0] for a, b in itertools.pairwise(windows))  # one at a time, in turn


def test_the_data_set_has_labels_for_every_attack_type(dataset: Path) -> None:
    meta = json.loads((dataset / "run.json").read_text())
    got = receptions(dataset)
    rcv_s = got["rcv_time_ns"] / 1e9
    labelled = np.zeros(len(rcv_s), bool)
    for entry in meta["attacks"]:
        mine = got["attack"] == entry["label"]
        assert mine.sum() >= 40, entry  # five receivers hear each attacker for 3 s
        assert set(got["attack_type"][mine]) == {entry["type"]}
        assert (rcv_s[mine] >= entry["from_s"]).all() and (rcv_s[mine] < entry["to_s"] + LATE_S).all()
        labelled |= mine
    assert len(meta["attacks"]) == 16
    assert set(got["attack_type"][~labelled]) == {"none"} and (got["attack"][~labelled] == 0).all()
    truth = pq.read_table(dataset / "ground_truth.parquet").to_pydict()
    assert set(truth["attack"]) == {0, *range(1, 17)}


@pytest.mark.parametrize(("check", "attack"), [("freshness", "delayed_message"),
                                               ("leader_consistency", "forged_leader"),
                                               ("maneuver_entitlement", "forged_maneuver")])
def test_the_platooning_checks_flag_their_attack_in_the_data_set(dataset: Path, check: str, attack: str) -> None:
    got = receptions(dataset)
    mine = (got["attack_type"] == attack) & got["delivered"]
    assert mine.sum() >= 40 and got[f"fail_{check}"][mine].mean() >= 0.95
    assert not got[f"fail_{check}"][got["attack_type"] == "none"].any()
