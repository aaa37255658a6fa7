"""The install compiles the kernels: after ``python -m orchestrator.warm`` a run of any built-in vehicle model over
any built-in channel adds nothing to numba's cache, so the first run after installing compiles nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .test_resolved import REPO

pytestmark = pytest.mark.cold_compile  # compiles the kernels from an empty numba cache


def _cache_files(cache: Path) -> set[str]:
    return {str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()}


def test_after_the_install_step_a_run_compiles_nothing(tmp_path):
    cache = tmp_path / "numba"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    warm = subprocess.run([sys.executable, "-m", "orchestrator.warm"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert warm.returncode == 0, warm.stderr
    assert "compiled the kernels of 3 vehicle models x 3 channels" in warm.stdout
    compiled = _cache_files(cache)
    assert len([f for f in compiled if f.endswith(".nbi")]) >= 10  # kernels of physics, V2X, control and noise
    for sets in (["channel.type=itsg5", "vehicles.template.model=dynamic"], ["vehicles.template.model=unicycle"],
                 ["channel.type=cv2x"]):
        run = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", "scenarios/platoon.yaml", "--quiet",
                              "--out", str(tmp_path / "run"), "--set", "duration_s=2", "--set", "outputs.plots=false",
                              "--set", "outputs.report=false", *(a for s in sets for a in ("--set", s))],
                             cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr
        assert _cache_files(cache) == compiled, sorted(_cache_files(cache) - compiled)
