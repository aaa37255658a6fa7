"""The batch runner behind sweep and compare: every variant built like ``coopsim run`` builds a scenario (the
geodetic origin reaches ITS-G5), one worst-follower rule, and errors recorded per run."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import yaml

from orchestrator.batch.aggregate import worst_over_followers
from orchestrator.batch.compare import compare, summarise, variant_overrides
from orchestrator.batch.runner import Task, execute, run_outputs
from orchestrator.cli.main import main
from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

REPO = Path(__file__).resolve().parents[2]
PLATOON = REPO / "scenarios" / "platoon.yaml"
SHORT = ["duration_s=3", "outputs.plots=false", "outputs.report=false"]
MUNICH = (48.1374, 11.5755)  # far from the default origin (Dortmund, 51.4934 N 7.4136 E)
FAIL_AT = {"name": "boom", "type": "tests.orchestrator.plugins:FailAt", "params": {"at_s": 1.0}}


def munich_scenario(tmp_path: Path) -> Path:
    text = PLATOON.read_text().replace("origin: {lat_deg: 51.4934, lon_deg: 7.4136}",
                                       f"origin: {{lat_deg: {MUNICH[0]}, lon_deg: {MUNICH[1]}}}")
    assert f"lat_deg: {MUNICH[0]}" in text and "type: ideal" in text
    path = tmp_path / "munich.yaml"
    path.write_text(text)
    return path


def pcap_positions(path: Path) -> list[tuple[float, float]]:
    """Sender latitude and longitude [deg] of every GeoNetworking frame, read from the SHB long position vector
    (Ethernet 14 B, GN basic 4 B, common 8 B, then GN_ADDR 8 B and the timestamp 4 B before latitude, longitude
    in 0.1 micro-degree)."""
    data = path.read_bytes()
    offset, out = 24, []
    while offset < len(data):
        length = struct.unpack_from("<I", data, offset + 8)[0]
        frame = data[offset + 16: offset + 16 + length]
        offset += 16 + length
        if struct.unpack_from("!H", frame, 12)[0] == 0x8947:
            lat, lon = struct.unpack_from("!ii", frame, 38)
            out.append((lat / 1e7, lon / 1e7))
    return out


@pytest.mark.slow
def test_itsg5_variant_runs_at_the_scenarios_origin(tmp_path):
    scenario = munich_scenario(tmp_path)
    out = tmp_path / "cmp"
    code = main(["compare", str(scenario), "--channels", "ideal,itsg5", "--out", str(out), "--jobs", "2",
                 "--quiet", *(f"--set={s}" for s in SHORT)])
    assert code == 0
    channel = yaml.safe_load((out / "itsg5" / "scenario.resolved.yaml").read_text())["channel"]
    assert channel["type"] == "itsg5"
    assert (channel["origin_lat_deg"], channel["origin_lon_deg"]) == MUNICH
    positions = pcap_positions(out / "itsg5" / "v2x.pcap")
    assert len(positions) > 10  # four robots, 3 s, at least one CAM per second each
    for lat, lon in positions:  # the robots stay within a few metres of the origin
        assert lat == pytest.approx(MUNICH[0], abs=1e-3) and lon == pytest.approx(MUNICH[1], abs=1e-3)
    # the variant is the scenario `coopsim run --set channel.type=itsg5` runs: same resolved file, same traces
    alone = tmp_path / "alone"
    assert main(["run", str(scenario), "--out", str(alone), "--quiet", "--set=channel.type=itsg5",
                 *(f"--set={s}" for s in SHORT)]) == 0
    assert (alone / "scenario.resolved.yaml").read_text() == (out / "itsg5" / "scenario.resolved.yaml").read_text()
    run = {d: json.loads((d / "run.json").read_text()) for d in (alone, out / "itsg5")}
    assert run[alone]["digest"] == run[out / "itsg5"]["digest"]
    # the summary is the worst-follower rule applied to each variant's metrics.json
    saved = json.loads((out / "comparison.json").read_text())
    for variant in ("ideal", "itsg5"):
        followers = json.loads((out / variant / "metrics.json").read_text())["followers"]
        assert len(followers) == 3
        for key in ("min_gap_m", "spacing_error_max_m", "pdr", "latency_mean_s"):
            assert saved["summary"][key][variant] == worst_over_followers(followers, key)
        assert saved["summary"]["min_gap_m"][variant] == min(f["min_gap_m"] for f in followers.values())


@pytest.mark.slow
def test_a_fidelity_from_a_scenario_object_keeps_the_origin(tmp_path):
    scenario = parse_scenario(munich_scenario(tmp_path).read_text(), overrides=SHORT)
    overrides = variant_overrides(scenario, "fidelity", "full")
    assert overrides[:2] == ["channel={type: itsg5}", "channel.type=itsg5"]  # ITS-G5 from its own defaults
    assert "vehicles.template.model=dynamic" in overrides and "physics.estimate=odometry" in overrides
    result = compare(scenario, "fidelity", ["full"], tmp_path / "f", jobs=1)
    assert result["ok"] and result["variants"] == ["full"]
    resolved = yaml.safe_load((tmp_path / "f" / "full" / "scenario.resolved.yaml").read_text())
    assert (resolved["channel"]["origin_lat_deg"], resolved["channel"]["origin_lon_deg"]) == MUNICH
    assert resolved["vehicles"]["template"]["model"] == "dynamic"


def test_the_worst_follower_rule():
    followers = {"a": {"min_gap_m": 1.2, "min_ttc_s": 4.0, "pdr": 0.97, "latency_mean_s": 0.004,
                       "interval_mean_s": 0.2, "spacing_error_max_m": 0.3},
                 "b": {"min_gap_m": 0.9, "min_ttc_s": 6.0, "pdr": 0.99, "latency_mean_s": 0.006,
                       "interval_mean_s": 0.1, "spacing_error_max_m": None},
                 "c": {"min_gap_m": 1.5, "min_ttc_s": None, "pdr": 1.0, "latency_mean_s": 0.005,
                       "interval_mean_s": 0.3, "spacing_error_max_m": 0.1}}
    expected = {"min_gap_m": 0.9, "min_ttc_s": 4.0, "pdr": 0.97, "latency_mean_s": 0.006, "interval_mean_s": 0.3,
                "spacing_error_max_m": 0.3}
    assert {k: worst_over_followers(followers, k) for k in expected} == expected
    assert worst_over_followers(followers, "aoi_mean_s") is None  # no follower reports it
    # compare's summary applies the same rule
    runs = {"x": {"metrics": {"followers": followers, "channel": {"cbr_mean": 0.1}}}, "y": {"metrics": {}}}
    summary = summarise(runs)
    assert summary["min_gap_m"] == {"x": 0.9, "y": None} and summary["pdr"] == {"x": 0.97, "y": None}
    assert summary["cbr_mean"] == {"x": 0.1, "y": None} and "cbr_max" not in summary


def test_a_run_that_raises_is_recorded_and_the_others_complete(tmp_path):
    good = parse_scenario(PLATOON.read_text(), overrides=SHORT)
    # validation passes; only setting the federates up finds that the extra one reads speeds in km/h, so the run
    # itself raises
    reader = 'federates=[{"name": "dash", "type": "tests.orchestrator.recording_plugins:KmhReader"}]'
    bad = parse_scenario(PLATOON.read_text(), overrides=[*SHORT, reader])
    with pytest.raises(Exception, match="km/h"):
        run_scenario(bad, tmp_path / "direct")
    tasks = [Task(0, 0, bad, tmp_path / "bad", 42, "<bad>"), Task(1, 0, good, tmp_path / "good", 42, "<good>")]
    records = sorted(execute(tasks, jobs=2), key=lambda r: r["point"])
    assert [r["status"] for r in records] == ["error", "ok"]
    assert records[0]["error"]["type"] == "ScenarioError" and "km/h" in records[0]["error"]["message"]
    run, metrics = run_outputs(records[0])
    assert run["status"] == "error" and metrics == {}
    run, metrics = run_outputs(records[1])
    assert run["seed"] == 42 and run["digest"] == records[1]["digest"] and len(metrics["followers"]) == 3


@pytest.mark.slow
def test_a_failing_variant_is_reported_with_its_error(tmp_path):
    scenario = parse_scenario(PLATOON.read_text(), overrides=SHORT)
    result = compare(scenario, "channel", ["ideal", "itsg5"], tmp_path, jobs=2,
                     overrides=[f"federates=[{json.dumps(FAIL_AT)}]"])
    assert not result["ok"]
    for variant in ("ideal", "itsg5"):
        run = result["runs"][variant]["run"]
        assert run["status"] == "failed" and run["error"]["federate"] == "boom"
        assert run["error"]["sim_time_s"] == pytest.approx(1.0) and "sensor driver lost" in run["error"]["message"]
        assert result["summary"]["min_gap_m"][variant] is None
    assert (tmp_path / "comparison.html").is_file()
    assert json.loads((tmp_path / "comparison.json").read_text())["ok"] is False
