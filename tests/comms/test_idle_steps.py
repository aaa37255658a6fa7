"""A channel step in which nothing can happen on the medium (no frame starts or ends and no CBR window closes by
then) skips the access kernel; the run must be the one that calls the kernel at every step: same digest (every link
with ``trace: all``), same channel load, same CAM triggers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from comms_models.itsg5 import access as ax
from comms_models.itsg5 import model
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
CASES = {
    # ETSI rules with the platooning message: two frame kinds through one queue, second frames promoted
    "etsi_pm": ["channel.platooning_message=true"],
    # 10 Hz CAMs behind the DCC gatekeeper, 24 stations in two lanes
    "fixed_rate": ["channel.generation.mode=fixed_rate", "channel.generation.fixed_rate_hz=10", "vehicles.count=24",
                   "platoon.size=8"],
}


def _run(tmp: Path, name: str, sets: list[str]) -> str:
    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", [
        "channel.type=itsg5", "channel.trace=all", "duration_s=6", "outputs.plots=false", "outputs.report=false",
        *sets])
    result = run_scenario(scenario, tmp / name)
    assert result.ok
    trace = tmp / name / "trace"
    files = "/".join(hashlib.sha256((trace / f).read_bytes()).hexdigest()
                     for f in ("channel_load.parquet", "v2x.parquet"))
    return f"{result.run_info['digest']}/{files}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_skipping_idle_steps_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    calls = {"kernel": 0, "steps": 0}
    advance, step = ax.advance, model.ItsG5Channel._advance_medium

    def counted_advance(*args: object) -> int:
        calls["kernel"] += 1
        return advance(*args)

    def counted_step(self: model.ItsG5Channel, t_ns: int, x: object, y: object) -> None:
        calls["steps"] += 1
        step(self, t_ns, x, y)

    monkeypatch.setattr(model.ax, "advance", counted_advance)
    monkeypatch.setattr(model.ItsG5Channel, "_advance_medium", counted_step)
    skipping = _run(tmp_path, "skipping", CASES[case])
    assert calls["kernel"] < 0.8 * calls["steps"], calls  # the skip is taken (most steps of a small platoon)

    def every_step(self: model.ItsG5Channel, t_ns: int, x: object, y: object) -> None:
        self._ctr[ax.C_NEXT] = 0  # as if something could always happen
        step(self, t_ns, x, y)

    monkeypatch.setattr(model.ItsG5Channel, "_advance_medium", every_step)
    assert _run(tmp_path, "every", CASES[case]) == skipping
