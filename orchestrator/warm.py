"""Compile the kernels at install time: ``python -m orchestrator.warm`` runs a short platoon with each built-in
vehicle model over each built-in channel, outputs off, so numba's on-disk cache holds every kernel a run uses and
the first ``coopsim run`` after installing does not spend seconds compiling (``make demo`` and the Docker image
call it). The ITS-G5 link loops are compiled serial and parallel in one kernel; the probe of how fast the threads
wake (``comms_models.itsg5.threads``) is compiled here too."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = ("kinematic", "dynamic", "unicycle")
CHANNELS = ("ideal", "itsg5")


def warm(quiet: bool = False) -> float:
    """Run every (vehicle model, channel) once for half a second; returns the wall time it took."""
    from comms_models.itsg5.threads import threads_wake_fast

    from .runner import run_scenario
    from .scenario import load_scenario

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            for channel in CHANNELS:
                scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", [
                    "duration_s=0.5", f"channel.type={channel}", f"vehicles.template.model={model}",
                    "outputs.plots=false", "outputs.report=false"])
                run_scenario(scenario, Path(tmp) / f"{model}-{channel}")
    threads_wake_fast()  # a 4-robot run never asks: the parallel loops pay from PARALLEL_MIN_LINKS links per frame
    took = time.perf_counter() - started
    if not quiet:
        print(f"compiled the kernels of {len(MODELS)} vehicle models x {len(CHANNELS)} channels in {took:.1f} s")
    return took


if __name__ == "__main__":
    warm(quiet="--quiet" in sys.argv[1:])
