"""SIGINT and SIGTERM at random points of a 200-vehicle ITS-G5 run (a real ``coopsim run`` process): every time the
run stops at the next instant with exit 130, ``run.json`` says interrupted, every trace is readable and the vehicle
and V2X traces end at the same simulated time."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
FLEET = ["--set", "vehicles.count=200", "--set", "platoon.size=8", "--set", "channel.type=itsg5",
         "--set", "duration_s=600", "--set", "outputs.plots=false", "--set", "outputs.report=false"]
TRIES = 8  # each a fresh process (about 5 s): eight random points, two of them by SIGTERM


def _interrupt(out: Path, after_s: float, sig: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", "scenarios/platoon.yaml", "--out",
                             str(out), "--quiet", *FLEET], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "trace").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the run has begun building its world
        time.sleep(after_s)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.slow
def test_interrupts_at_random_points_lose_nothing(tmp_path):
    rng = random.Random(20261123)
    stopped_at = []
    digests: dict[int, str] = {}
    for k in range(TRIES):
        out = tmp_path / f"run{k}"
        sig = signal.SIGTERM if k % 4 == 3 else signal.SIGINT
        done = _interrupt(out, rng.uniform(0.8, 3.0), sig)  # the world takes ~1 s to set up: mostly mid-run
        assert done.returncode == 130, (k, done.stderr)
        assert "Traceback" not in done.stderr
        info = json.loads((out / "run.json").read_text())
        assert info["status"] == "interrupted" and info["interrupted_by"] == signal.Signals(sig).name
        tables = {p.stem: pq.read_table(p) for p in (out / "trace").glob("*.parquet")}  # every file readable
        end_ns = round(info["sim_time_s"] * 1e9)
        stopped_at.append(end_ns)
        if "vehicles" not in tables or tables["vehicles"].num_rows == 0:
            continue  # stopped before the first instant
        t_vehicles = tables["vehicles"].column("t_ns").to_numpy()
        assert t_vehicles.max() == end_ns and tables["vehicles"].num_rows == 200 * (end_ns // 10_000_000 + 1)
        t_v2x = tables["v2x"].column("t_ns").to_numpy()
        assert (t_v2x <= end_ns).all()
        digests[end_ns] = info["digest"]
    assert len(set(stopped_at)) >= TRIES // 2  # really random points, not one place
    # nothing lost: the latest stop equals, bit for bit, a run that was simply that long
    end_ns = max(digests)
    assert end_ns > 1_000_000_000
    reference = tmp_path / "reference"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    fleet = [*FLEET[:-6], "--set", f"duration_s={end_ns / 1e9}", *FLEET[-4:]]
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", "scenarios/platoon.yaml", "--out",
                           str(reference), "--quiet", *fleet], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads((reference / "run.json").read_text())["digest"] == digests[end_ns]
