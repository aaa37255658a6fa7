"""Every built-in attack forges what its station sends: labelled in trace/v2x.parquet, visible in the capture (as
tshark decodes it), a data replay equal to the replayed CAM but for the station id and generation time, the same
seed giving the same traces, and an attacker nobody configured changing nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from comms_models.attacks import ATTACKS
from comms_models.itsg5.geo import LocalProjection
from tests.comms.attack_run import ATTACKS as RUN_ATTACKS
from tests.comms.attack_run import FROM_S, TO_S, run, trace

pytestmark = pytest.mark.slow  # one ~10 s run shared by the module, a second one for determinism
NS = 1_000_000_000
FIELDS = ("its.stationID", "cam.generationDeltaTime", "its.latitude", "its.longitude", "its.speedValue",
          "its.headingValue", "its.longitudinalAccelerationValue", "its.yawRateValue", "its.curvatureValue")


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run(tmp_path_factory.mktemp("attacks") / "run")


@pytest.fixture(scope="module")
def cams(attacked: Path) -> list[dict[str, int]]:
    """The captured CAMs as tshark decodes them (fields of ``FIELDS``)."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark (Wireshark) is not installed")
    args = ["tshark", "-r", str(attacked / "v2x.pcap"), "-Y", "cam.generationDeltaTime", "-T", "fields", "-E",
            "separator=|"]
    for field in FIELDS:
        args += ["-e", field]
    lines = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout.splitlines()
    rows = [line.split("|") for line in lines if line.strip()]
    return [{name: int(value.split(",")[0]) for name, value in zip(FIELDS, row, strict=True)} for row in rows]


def test_the_run_covers_every_built_in_attack() -> None:
    assert sorted(name for name, _ in RUN_ATTACKS) == sorted(ATTACKS.builtin_names())


@pytest.mark.parametrize("k", range(len(RUN_ATTACKS)), ids=[name for name, _ in RUN_ATTACKS])
def test_forged_frames_are_labelled_in_the_window_only(attacked: Path, k: int) -> None:
    v2x = trace(attacked, "v2x")
    label, name = k + 1, RUN_ATTACKS[k][0]
    mine = (v2x["attack"] == label) & (v2x["event"] == "tx") & (v2x["outcome"] == "sent")
    assert mine.sum() >= 5, name
    gen = v2x["generated_ns"][mine]
    assert gen.min() >= FROM_S * NS and gen.max() < TO_S * NS
    wanted = "pm" if name.startswith("desired_accel") else "cam"
    assert set(v2x["message"][mine]) == {wanted}
    assert ((v2x["attack"] == label) & (v2x["event"] == "rx") & (v2x["outcome"] == "received")).any()
    claimed = 900_000 + label + 1 if name == "ghost" else label + 1  # robot k + 1 has id k + 2
    assert set(v2x["sender"][mine]) == {claimed}


def _cams_of(cams: list[dict[str, int]], station: int) -> list[dict[str, int]]:
    return [c for c in cams if c["its.stationID"] == station]


def test_the_capture_holds_the_forged_positions_and_speeds(attacked: Path, cams: list[dict[str, int]]) -> None:
    lat, lon = LocalProjection(51.4934, 7.4136).to_geodetic(np.array([40.0]), np.array([3.0]))
    constant = _cams_of(cams, 2)
    assert sum(c["its.latitude"] == round(lat[0] * 1e7) and c["its.longitude"] == round(lon[0] * 1e7)
               for c in constant) >= 20  # 4 s at 10 Hz (some frames go to the DCC gatekeeper)
    assert sum(c["its.speedValue"] == 10_000 for c in _cams_of(cams, 7)) >= 20  # 100 m/s in 0.01 m/s
    far = [c for c in _cams_of(cams, 4) if abs(c["its.latitude"] - round(lat[0] * 1e7)) > 20_000]  # > ~200 m
    assert len(far) >= 20


def test_a_ghost_and_a_dos_are_on_the_air(cams: list[dict[str, int]]) -> None:
    assert len(_cams_of(cams, 900_012)) >= 30  # 10 Hz for 4 s, the attacker's own CAMs beside them
    assert len(_cams_of(cams, 11)) > 2 * len(_cams_of(cams, 14))  # DoS at 50 Hz against an honest 10 Hz


def test_a_replay_is_the_replayed_cam_but_for_station_and_time(attacked: Path, cams: list[dict[str, int]]) -> None:
    content = [f for f in FIELDS if f not in ("its.stationID", "cam.generationDeltaTime")]
    target = {tuple(c[f] for f in content) for c in _cams_of(cams, 1)}
    replays = [c for c in _cams_of(cams, 10) if tuple(c[f] for f in content) in target]
    v2x = trace(attacked, "v2x")
    forged = int(((v2x["attack"] == 9) & (v2x["event"] == "tx") & (v2x["outcome"] == "sent")).sum())
    assert len(replays) >= forged >= 20  # every forged CAM carries one of the leader's (plus honest look-alikes)


def test_the_same_seed_gives_the_same_traces(attacked: Path, tmp_path: Path) -> None:
    again = run(tmp_path / "again")
    digest = [json.loads((d / "run.json").read_text())["digest"] for d in (attacked, again)]
    assert digest[0] == digest[1]
    assert (attacked / "v2x.pcap").read_bytes() == (again / "v2x.pcap").read_bytes()
