"""The ITS-G5 medium's results do not depend on how large its buffers start: when a buffer runs short mid-step, the
kernel hands back, the channel grows the buffer and the kernel resumes exactly where it stopped (the order in which
ties between equal start times are taken included). Buffers that start at one row, at the defaults and at many
times the need must give the same run, every link traced."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from comms_models.itsg5 import access_layout as ax
from comms_models.itsg5 import medium
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

pytestmark = pytest.mark.slow  # the same run at several buffer sizes

REPO = Path(__file__).resolve().parents[2]
BUFFERS = {"ti": ax.N_TI64, "tf": ax.N_CONTENT, "li": ax.N_LI64, "lf": ax.N_LF64, "tx_out": ax.N_TXO,
           "rx_out_i": ax.N_RXO_I, "rx_out_f": ax.N_RXO_F}


def _run(tmp: Path, name: str, rows: int | None, monkeypatch: pytest.MonkeyPatch) -> str:
    init = medium.KernelBuffers.__init__

    def sized(self: medium.KernelBuffers) -> None:
        init(self)
        if rows is not None:
            for attr, columns in BUFFERS.items():
                setattr(self, attr, np.empty((rows, columns), getattr(self, attr).dtype))

    monkeypatch.setattr(medium.KernelBuffers, "__init__", sized)
    # 240 stations at 10 Hz within a few hundred metres: bursts of frames with equal start times, all in range
    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", [
        "channel.type=itsg5", "channel.trace=all", "vehicles.count=240", "platoon.size=8", "duration_s=1.0",
        "channel.generation.mode=fixed_rate", "channel.generation.fixed_rate_hz=10",
        "channel.generation.start_jitter_s=0", "outputs.plots=false", "outputs.report=false"])
    result = run_scenario(scenario, tmp / name)
    assert result.ok
    load = hashlib.sha256((tmp / name / "trace" / "channel_load.parquet").read_bytes()).hexdigest()
    return f"{result.run_info['digest']}/{load}"


def test_the_run_does_not_depend_on_the_buffer_sizes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = _run(tmp_path, "default", None, monkeypatch)
    assert _run(tmp_path, "one_row", 1, monkeypatch) == default
    assert _run(tmp_path, "large", 2_000_000, monkeypatch) == default
