"""The ITS-G5 link loops give the same run on one thread and on two: each link of a frame touches its own row of the
link arrays and its own receiver, and draws from its own key, so neither the split over threads nor the choice
between the serial and the parallel loops can change a result (compared through the run digest, which covers every
link with ``trace: all``, and the channel-load trace)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from comms_models.itsg5 import threads
from comms_models.itsg5.threads import NEVER, PARALLEL_MIN_LINKS, ThreadChoice

REPO = Path(__file__).resolve().parents[2]
# 320 stations, every link traced: 319 links per frame, above the parallel threshold; `mode` forces the loops
RUN = """
import json, sys
from pathlib import Path
from comms_models.itsg5 import model, threads
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

mode, out = sys.argv[1], Path(sys.argv[2])
threads.ThreadChoice.par_min = lambda self: {"serial": threads.NEVER, "parallel": 1}[mode]
model.CHECK_FRAMES = 1  # the kernel hands back at every parallel frame: resuming must not change a tie
scenario = load_scenario(Path("scenarios/platoon.yaml"), [
    "channel.type=itsg5", "vehicles.count=320", "platoon.size=8", "duration_s=0.6", "channel.trace=all",
    "outputs.plots=false", "outputs.report=false"])
result = run_scenario(scenario, out)
print(json.dumps({"digest": result.run_info["digest"]}))
"""


def _run(tmp: Path, mode: str, n_threads: int) -> str:
    out = tmp / f"{mode}-{n_threads}"
    proc = subprocess.run([sys.executable, "-c", RUN, mode, str(out)], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "NUMBA_NUM_THREADS": str(n_threads)}, timeout=600, check=True)
    digest = json.loads(proc.stdout.strip().splitlines()[-1])["digest"]
    load = hashlib.sha256((out / "trace" / "channel_load.parquet").read_bytes()).hexdigest()
    return f"{digest}/{load}"


@pytest.mark.slow
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores to run two threads")
def test_same_digest_serial_and_on_one_or_two_threads(tmp_path: Path) -> None:
    serial = _run(tmp_path, "serial", 2)
    assert _run(tmp_path, "parallel", 1) == serial
    assert _run(tmp_path, "parallel", 2) == serial


def test_the_choice_stays_serial_for_few_stations_or_one_thread() -> None:
    choice = ThreadChoice(stations=PARALLEL_MIN_LINKS)
    choice.threads = 2
    for _ in range(1000):
        assert choice.par_min() == NEVER
        choice.record(1e-2, 100)
    single = ThreadChoice(stations=10_000)
    single.threads = 1
    assert single.par_min() == NEVER


def test_the_choice_keeps_the_faster_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "threads_wake_fast", lambda: True)
    choice = ThreadChoice(stations=1000)
    choice.threads = 2
    modes = []
    for _ in range(200):
        par = choice.par_min() != NEVER
        modes.append(par)
        choice.record(1e-2 if par else 2e-2, 100)  # parallel twice as fast
    assert not modes[0] and sum(modes[-100:]) >= 85  # parallel, but for a short serial re-check now and then
    slow = ThreadChoice(stations=1000)
    slow.threads = 2
    tried = []
    for _ in range(2000):
        par = slow.par_min() != NEVER
        tried.append(par)
        slow.record(5e-1 if par else 1e-2, 100)  # parallel fifty times slower: tried ever more rarely
    at = np.flatnonzero(tried)  # each trial ends after its first, stalled step, and they drift apart
    assert 0 < len(at) <= 8 and np.all(np.diff(at, 2) > 0)


def test_a_slow_wake_skips_the_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "threads_wake_fast", lambda: False)
    choice = ThreadChoice(stations=1000)
    choice.threads = 2
    assert not any(choice.par_min() != NEVER or choice.record(1e-2, 100) for _ in range(5000))


def test_wake_probe_runs() -> None:
    assert isinstance(threads.threads_wake_fast(), bool)
    assert np.isfinite(threads.WAKE_FAST_S)


def test_a_stalled_parallel_step_ends_the_parallel_mode_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "threads_wake_fast", lambda: True)
    choice = ThreadChoice(stations=1000)
    choice.threads = 2
    for _ in range(100):  # parallel twice as fast: kept
        choice.record(1e-2 if choice.par_min() != NEVER else 2e-2, 100)
    while choice.par_min() == NEVER:  # a serial re-check may be under way
        choice.record(2e-2, 100)
    choice.record(10.0, 100)  # the cores got busy: one step 500 times slower
    assert choice.par_min() == NEVER and choice.until_trial > threads.FIRST_GAP
