"""Ideal vs ITS-G5 on identical seeds, end to end: comparison outputs, the run's capture dissected by tshark."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.batch.compare import compare
from orchestrator.scenario import parse_scenario

pytestmark = pytest.mark.slow  # an ideal/ITS-G5 comparison with plots

REPO = Path(__file__).resolve().parents[2]
PLATOON = REPO / "scenarios" / "platoon.yaml"


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("compare")
    scenario = parse_scenario(PLATOON.read_text(), overrides=["duration_s=12"])
    return out, compare(scenario, "channel", ["ideal", "itsg5"], out, jobs=2)


def test_comparison_files_and_metrics_side_by_side(comparison):
    out, result = comparison
    assert result["ok"] and result["variants"] == ["ideal", "itsg5"] and result["kind"] == "channel"
    for name in ("comparison.json", "comparison.html", "ideal/run.json", "itsg5/run.json", "itsg5/v2x.pcap",
                 "itsg5/trace/v2x.parquet",
                 "plots/latency_interval_histograms.png", "plots/overlay_trajectories_speeds.png"):
        assert (out / name).is_file(), name
    assert list((out / "plots").glob("received_predecessor_speed*.png"))  # one figure per platoon
    saved = json.loads((out / "comparison.json").read_text())
    assert saved["runs"]["ideal"]["run"]["seed"] == saved["runs"]["itsg5"]["run"]["seed"] == 42
    summary = saved["summary"]
    # the ideal channel: exact, every step, no delay; ITS-G5: processing and access delay, rules-driven rate
    assert summary["latency_mean_s"]["ideal"] == 0.0 and summary["interval_mean_s"]["ideal"] == pytest.approx(0.01)
    assert 0.001 < summary["latency_mean_s"]["itsg5"] < 0.01
    assert 0.1 <= summary["interval_mean_s"]["itsg5"] <= 1.0  # T_GenCamMin .. T_GenCamMax
    assert summary["aoi_mean_s"]["itsg5"] > 0.05
    assert summary["spacing_error_rms_m"]["itsg5"] > summary["spacing_error_rms_m"]["ideal"]
    diff = saved["differences"]["spacing_error_rms_m"]["itsg5"]
    assert diff == pytest.approx(summary["spacing_error_rms_m"]["itsg5"] - summary["spacing_error_rms_m"]["ideal"])
    assert summary["cbr_mean"]["itsg5"] is not None
    html = (out / "comparison.html").read_text()
    assert html.count("data:image/png;base64,") >= 3 and "itsg5 - ideal" in html  # figures inlined, no links
    followers = saved["runs"]["itsg5"]["metrics"]["followers"]
    for name in ("robot1", "robot2", "robot3"):
        assert {"pdr", "latency_mean_s", "latency_p95_s", "interval_mean_s", "aoi_mean_s"} <= set(followers[name])
        assert 0.9 <= followers[name]["pdr"] <= 1.0  # a few metres apart: nothing should be lost


def test_the_runs_capture_is_dissected_as_cam_by_tshark(comparison):
    tshark = shutil.which("tshark")
    if tshark is None:
        pytest.skip("tshark is not installed (make test installs it)")
    out, _ = comparison
    proc = subprocess.run(
        [tshark, "-r", str(out / "itsg5" / "v2x.pcap"), "-T", "fields", "-e", "its.stationID",
         "-e", "its.speedValue", "-e", "btpb.dstport"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.splitlines() if line.strip()]
    assert len(rows) > 20
    assert {r[0] for r in rows} == {"1", "2", "3", "4"}
    assert {r[2] for r in rows} == {"2001"}
    speeds = [int(r[1]) for r in rows]
    assert all(50 <= s <= 150 for s in speeds)  # 0.01 m/s units: the robots drive about 1 m/s


def test_a_platoon_out_of_radio_range_leaves_the_receptions_of_another_bit_identical(tmp_path):
    """ITS-G5 draws are keyed by (sender, receiver, generation time): a second platoon 5 km away (beyond the
    channel's cut-off) must not change a single reception of the first."""
    import numpy as np
    import pyarrow.parquet as pq

    from orchestrator.runner import run_scenario

    common = ["duration_s=6", "channel.type=itsg5", "outputs.plots=false", "outputs.report=false",
              "platoon.size=4", "platoon.lateral_spacing_m=5000"]
    tables = {}
    for count in (4, 8):
        out = tmp_path / str(count)
        assert run_scenario(parse_scenario(PLATOON.read_text(), overrides=[*common, f"vehicles.count={count}"]), out).ok
        table = pq.read_table(out / "trace" / "v2x.parquet").to_pydict()
        first = np.asarray(table["sender"]) <= 4
        if count == 8:
            assert (np.asarray(table["sender"]) > 4).any()  # the far platoon does transmit
        tables[count] = {k: np.asarray(v, dtype=object)[first] for k, v in table.items()}
    assert len(tables[4]["t_ns"]) > 20
    for col in ("t_ns", "sender", "receiver", "generated_ns", "latency_s", "rx_power_dbm", "outcome"):
        assert [str(v) for v in tables[4][col]] == [str(v) for v in tables[8][col]], col
