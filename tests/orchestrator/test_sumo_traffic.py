"""A platoon of 8 among 200 SUMO vehicles on ITS-G5: SUMO's vehicles are V2X stations like any robot, their CAMs
are in the capture (dissected by tshark) and they load the channel (a higher busy ratio than the platoon alone)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

from .test_resolved import REPO

pytest.importorskip("libsumo")
sys.path.insert(0, str(REPO / "bench"))
from bench_sumo import SCENARIO, routes  # the benchmark's scenario: one definition

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

SUMO_VEHICLES = 200


def _run(tmp: Path, name: str, traffic: bool) -> Path:
    shutil.copy(REPO / "scenarios" / "sumo" / "highway.net.xml", tmp)
    (tmp / "traffic.rou.xml").write_text(routes(SUMO_VEHICLES))
    text = SCENARIO.format(seconds=3.0, channel="itsg5").replace("outputs: {trace: false",
                                                                 "outputs: {trace: true")
    if not traffic:
        text = text[:text.index("federates:")] + text[text.index("outputs:"):]
    (tmp / f"{name}.yaml").write_text(text)
    out = tmp / name
    result = run_scenario(load_scenario(tmp / f"{name}.yaml"), out)
    assert result.ok, result.error
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("traffic")
    return _run(tmp, "with", True), _run(tmp, "without", False)


def test_sumo_vehicles_are_stations_that_load_the_channel(runs):
    with_traffic, alone = runs
    senders = set(pq.read_table(with_traffic / "trace" / "v2x.parquet", columns=["sender"]).column(0).to_pylist())
    assert len(senders) == 8 + SUMO_VEHICLES  # every SUMO vehicle sent CAMs, and so did the platoon
    cbr = {name: float(np.mean(pq.read_table(run / "trace" / "channel_load.parquet", columns=["cbr"])
                               .column(0).to_numpy())) for name, run in (("with", with_traffic), ("alone", alone))}
    assert cbr["with"] > 3 * cbr["alone"], cbr
    run = json.loads((with_traffic / "run.json").read_text())
    assert run["status"] == "ok" and run["outcomes"]["collisions"] == 0


def test_sumo_vehicles_cams_are_in_the_capture(runs):
    tshark = shutil.which("tshark")
    if tshark is None:
        pytest.skip("tshark is not installed (make test installs it)")
    proc = subprocess.run([tshark, "-r", str(runs[0] / "v2x.pcap"), "-T", "fields", "-e", "its.stationID"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    stations = {int(s) for s in proc.stdout.split()}
    assert {s for s in stations if s > 8}  # stations beyond the platoon's ids 1..8: SUMO's vehicles
    assert len(stations) > 100
