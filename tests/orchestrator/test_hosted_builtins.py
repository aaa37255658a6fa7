"""The built-in physics, V2X and control federates hosted by real ``coopsim host`` processes on loopback
(``execution.remote``): the same traces as in process, and the same outcomes in ``run.json``."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario
from tests.orchestrator.test_outcomes import CRASH as OUTCOMES_CRASH

# the outcomes test's crash (a cruise-controlled follower at twice the leader's speed hits it at about 4 s), over
# ITS-G5, which logs every CAM, and without outputs
CRASH = (OUTCOMES_CRASH.replace("duration_s: 6.0", "duration_s: 5.0")
         .replace("outputs: {plots: false, report: true}",
                  "channel: {type: itsg5}\noutputs: {plots: false, report: false}"))


@pytest.mark.slow
def test_hosted_built_ins_give_the_in_process_traces_and_outcomes(tmp_path: Path, builtin_hosts: dict[str, str]):
    local = run_scenario(parse_scenario(CRASH), tmp_path / "local")
    physics, v2x, control = (builtin_hosts[kind] for kind in ("physics", "v2x", "control"))
    remote = f"execution.remote={{physics: '{physics}', v2x: '{v2x}', control: '{control}'}}"
    hosted = run_scenario(parse_scenario(CRASH, overrides=[remote]), tmp_path / "hosted")
    assert local.run_info["status"] == "collided" == hosted.run_info["status"]
    assert hosted.run_info["digest"] == local.run_info["digest"]
    outcomes = local.run_info["outcomes"]
    assert outcomes["collisions"] >= 1 and outcomes["first_contact"]["robots"] == ["robot0", "robot1"]
    assert outcomes["silent_stations"] == []  # judged from the ITS-G5 log: every station sent
    assert hosted.run_info["outcomes"] == outcomes


@pytest.mark.slow
def test_a_hosted_control_federate_gets_the_maneuver_plan(tmp_path: Path, builtin_hosts: dict[str, str]):
    """The plan's mappings are keyed by platoon id (integers); they cross as strings and are read back as ids."""
    from orchestrator.scenario import load_scenario

    source = Path(__file__).resolve().parents[2] / "scenarios" / "highway_maneuvers.yaml"
    short = ["duration_s=6", "outputs.plots=false", "outputs.report=false",
             "maneuvers=[{at_s: 1, type: join, robot: j_tail, platoon: p1}]"]
    local = run_scenario(load_scenario(source, short), tmp_path / "local")
    remote = f"execution.remote={{control: '{builtin_hosts['control']}', v2x: '{builtin_hosts['v2x']}'}}"
    hosted = run_scenario(load_scenario(source, [*short, remote]), tmp_path / "hosted")
    assert local.ok and hosted.ok, hosted.error
    assert hosted.run_info["digest"] == local.run_info["digest"]
    import pyarrow.parquet as pq

    events = {where: pq.read_table(tmp_path / where / "trace" / "maneuver_events.parquet") for where in
              ("local", "hosted")}
    assert events["hosted"].equals(events["local"])
    assert events["hosted"].column("event").to_pylist()[:2] == ["requested", "accepted"]  # the join went on
