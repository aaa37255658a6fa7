"""A channel step in which nothing can happen on the medium (no frame starts or ends and no CBR window closes by
then) skips the access kernel; the run must be the one that calls the kernel at every step: same digest (every link
with ``trace: all``), same channel load, same CAM triggers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from comms_models.itsg5 import access as ax
from comms_models.itsg5 import medium
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


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_skipping_idle_steps_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    calls = {"kernel": 0, "steps": 0}
    advance, step = ax.advance, medium.Medium.advance

    def counted_advance(*args: object) -> int:
        calls["kernel"] += 1
        return advance(*args)

    def counted_step(self: medium.Medium, t_ns: int, x: object, y: object, on_window: object) -> bool:
        calls["steps"] += 1
        return step(self, t_ns, x, y, on_window)

    monkeypatch.setattr(medium.access, "advance", counted_advance)
    monkeypatch.setattr(medium.Medium, "advance", counted_step)
    skipping = _run(tmp_path, "skipping", CASES[case])
    assert calls["kernel"] < 0.8 * calls["steps"], calls  # the skip is taken (most steps of a small platoon)

    def every_step(self: medium.Medium, t_ns: int, x: object, y: object, on_window: object) -> bool:
        self.ctr[ax.C_NEXT] = 0  # as if something could always happen
        return step(self, t_ns, x, y, on_window)

    monkeypatch.setattr(medium.Medium, "advance", every_step)
    assert _run(tmp_path, "every", CASES[case]) == skipping
