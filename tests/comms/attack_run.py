"""One ITS-G5 platoon run with every built-in attack on its own robot and the default detector, shared by the
attack and misbehaviour tests (one ~10 s run instead of one per attack)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
FROM_S, TO_S = 2.0, 6.0
ATTACKS = [  # (attack, params); the k-th attacks robot k + 1, label k + 1
    ("constant_position", {"x_m": 40.0, "y_m": 3.0}),
    ("constant_offset", {"dx_m": 5.0}),
    ("random_position", {"half_width_m": 3000.0}),
    ("random_offset", {"max_offset_m": 50.0}),
    ("eventual_stop", {}),
    ("constant_speed", {"v_mps": 100.0}),
    ("speed_offset", {"dv_mps": 20.0}),
    ("random_speed", {"max_mps": 30.0}),
    ("data_replay", {"target": "robot0"}),
    ("dos", {"rate_hz": 50.0}),
    ("ghost", {"ahead_m": 5.0, "decel_mps2": 2.0, "brake_after_s": 1.0}),
    ("desired_accel_constant", {"u_mps2": 5.0}),
    ("desired_accel_sinusoid", {"amplitude_mps2": 4.0, "frequency_hz": 0.5}),
    ("delayed_message", {"delay_s": 1.0}),
    ("forged_leader", {"impersonate": "robot0", "u_leader_mps2": 3.0}),
    ("forged_maneuver", {"request": "split", "peer": "robot0", "platoon_index": 3}),
]
"""Every built-in attack on the messages (the jammers, which act on the air, are tests/comms/test_jamming.py's)."""
ROBOTS = len(ATTACKS) + 2  # the last robot honest: every attacker has a follower that hears it


def scenario_text(seed: int = 5) -> str:
    """The scenario: a straight platoon at 1 m/s, CAMs at a fixed 10 Hz, PMs at 10 Hz, every frame captured."""
    attacks = ",\n  ".join(json.dumps({"robot": f"robot{k + 1}", "type": name, "params": params, "from_s": FROM_S,
                                      "to_s": TO_S}) for k, (name, params) in enumerate(ATTACKS))
    return f"""version: 1
name: attacks
seed: {seed}
duration_s: 7.0
step_s: 0.01
vehicles: {{count: {ROBOTS}, name_prefix: robot, template: {{preset: auna_rc_1to10, model: kinematic}}}}
platoon: {{size: {ROBOTS}}}
leader: {{profile: constant, params: {{speed_mps: 1.0}}}}
controller: {{type: ela_cacc, period_s: 0.02, k1: 1.0, k2: 1.0, standstill_m: 1.0, time_gap_s: 1.0}}
channel: {{type: itsg5, generation: {{mode: fixed_rate, fixed_rate_hz: 10}}, platooning_message: {{rate_hz: 10}},
          pcap_max_frames: 1000000}}
attacks: [
  {attacks}]
detection: {{reaction: ignore}}
outputs: {{trace: true, plots: false, report: false}}
"""


def run(out: Path, seed: int = 5) -> Path:
    """Write the scenario beside ``out`` and run it with the ``coopsim`` command; returns the run directory."""
    out.parent.mkdir(parents=True, exist_ok=True)
    path = out.parent / f"{out.name}.yaml"
    path.write_text(scenario_text(seed))
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(path), "--out", str(out), "--quiet"],
                          cwd=REPO, capture_output=True, text=True, timeout=240)
    assert (out / "run.json").exists(), done.stderr[-3000:]
    return out


def trace(out: Path, name: str) -> dict[str, np.ndarray]:
    """A trace's columns (strings as object arrays)."""
    table = pq.read_table(out / "trace" / f"{name}.parquet")
    return {c: np.asarray(table.column(c).to_pylist()) for c in table.column_names}
