"""Honest runs of the shipped scenarios that have V2X, each judged by every detector check (the plausibility checks
and the Kalman residuals, reaction none, attacks removed): the false-positive rate of each check per scenario.

``python -m tests.orchestrator.honest_runs OUT_DIR`` runs them all and prints the table of
``docs/security-research.md``; ``tests/orchestrator/test_detector_false_positives.py`` bounds the rates.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from comms_models.misbehaviour.checks import CHECKS

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = ("platoon", "platoon_cv2x", "platoon_dynamic", "platoon_track", "two_platoons", "highway_maneuvers",
             "attacks_platoon", "attacks_jamming", "attacks_dataset", "highway_sumo")
NEEDS_SUMO = ("highway_sumo",)
SHORT_S = {"attacks_platoon": 15.0, "attacks_jamming": 15.0, "attacks_dataset": 15.0,
           "highway_maneuvers": 92.0, "two_platoons": 36.0}
"""Durations that keep what an honest run exercises, for the test (the doc's table runs them whole): the attack
scenarios' honest runs are a cruising platoon after their start (the attacks are removed); two_platoons' join ends
at 32.7 s; highway_maneuvers' merge, its last maneuver, at 88.4 s."""
DETECTION = "{type: plausibility, reaction: none, params: {checks: [" + ", ".join(CHECKS) + "]}}"


def command(name: str, out: Path, duration_s: float | None = None) -> list[str]:
    """The ``coopsim run`` of scenario ``name``, honest (no attacks), every check on."""
    args = [sys.executable, "-m", "orchestrator.cli", "run", f"scenarios/{name}.yaml", "--out", str(out), "--quiet",
            "--set", "outputs.plots=false", "--set", "outputs.report=false", "--set", f"detection={DETECTION}",
            "--set", "attacks=[]"]
    return args + (["--set", f"duration_s={duration_s}"] if duration_s else [])


def run_all(base: Path, names: tuple[str, ...] = SCENARIOS, duration_s: float | Mapping[str, float] | None = None,
            jobs: int = 2) -> dict[str, Path]:
    """Run the scenarios ``jobs`` at a time (``duration_s``: for all, or per scenario; else each its own); returns
    each run directory (asserting each finished)."""
    durations = duration_s if isinstance(duration_s, Mapping) else dict.fromkeys(names, duration_s)
    outs = {name: base / name for name in names}
    pending = list(names)
    running: list[tuple[str, subprocess.Popen]] = []
    while pending or running:
        while pending and len(running) < jobs:
            name = pending.pop(0)
            running.append((name, subprocess.Popen(command(name, outs[name], durations.get(name)), cwd=REPO,
                                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
        name, proc = running.pop(0)
        _, err = proc.communicate(timeout=1800)
        assert proc.returncode == 0, f"{name}: {err[-3000:]}"
    return outs


def rates(out: Path) -> dict[str, object]:
    """Honest messages, false positives of the fusion and per check, from a run's ``metrics.json``."""
    mb = json.loads((out / "metrics.json").read_text())["misbehaviour"]
    honest = mb["honest_messages"]
    by_check = mb.get("false_positives_by_check", {})
    return {"honest": honest, "false_positives": mb["false_positives"],
            "by_check": {name: by_check.get(name, 0) for name in CHECKS}}


def table(outs: dict[str, Path]) -> str:
    """The Markdown table: per scenario, honest messages and each check's false positives (count and rate)."""
    head = "| scenario | honest messages | " + " | ".join(f"`{c}`" for c in CHECKS) + " | any |"
    lines = [head, "|" + "---|" * (len(CHECKS) + 3)]
    for name, out in outs.items():
        r = rates(out)
        cells = [f"{n} ({n / r['honest']:.3%})" if n else "0" for n in r["by_check"].values()]
        fp = r["false_positives"]
        lines.append(f"| {name} | {r['honest']:,} | " + " | ".join(cells) + f" | {fp / r['honest']:.3%} |")
    return "\n".join(lines)


if __name__ == "__main__":
    base = Path(sys.argv[1])
    print(table(run_all(base)))
