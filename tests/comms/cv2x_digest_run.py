"""Runs of the cv2x channel whose every output is hashed, so a change meant to make the model faster can be checked to
leave its results bit for bit (``test_cv2x_bit_identical``; ``python -m tests.comms.cv2x_digest_run`` prints the
digests of the code as it is).

Stations on a 5 km two-lane road (longer than twice the cut-off radius) and a crossing road, each with its own
speed swing, stepped every 10 ms as the V2X federate does; each station but the first on its road listens to its
neighbour behind it. A run hashes the trace rows, the channel load, the CAM triggers, the deliveries of every step
and the metrics.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from comms_models.base import Interest
from comms_models.cv2x.model import Cv2xChannel
from core.robots import RobotSpec

CONFIGS: dict[str, dict[str, Any]] = {
    # ETSI CAMs of variable size (path history, signed, certificate once a second), Nakagami fading, every link traced
    "etsi": {"generation": {"mode": "etsi"}, "security_bytes": 100, "path_history_points": 23,
             "certificate_bytes": 130, "propagation": {"fading": "nakagami"}, "trace": "all"},
    # the analytical model's traffic: 190 bytes every 100 ms, every reception delivered
    "periodic": {"generation": {"mode": "fixed_rate", "fixed_rate_hz": 10}, "packet_bytes": 190, "deliver": "all"},
    # a saturated road with the CR limits of ETSI TS 103 574
    "congestion": {"generation": {"mode": "fixed_rate", "fixed_rate_hz": 10}, "packet_bytes": 500,
                   "congestion_control": True, "trace": "all"},
    # NR dynamic grants with a blind retransmission, 30 kHz slots
    "nr_dynamic": {"rat": "nr", "scs_khz": 30, "scheduling": "dynamic", "blind_retransmissions": 1,
                   "generation": {"mode": "etsi"}, "security_bytes": 100, "trace": "all",
                   "phy": {"subchannel_rbs": 10}},
    # NR semi-persistent at 30 kHz on 20 MHz, 50 ms reservations (the S-RSSI folded onto 50 ms), TR 37.885 highway
    "nr_sps": {"rat": "nr", "scs_khz": 30, "sps": {"rri_ms": 50, "t2_ms": 40, "delay_budget_ms": 50},
               "propagation": {"path_loss": "tr37885_highway"}, "packet_bytes": 120,
               "generation": {"mode": "fixed_rate", "fixed_rate_hz": 20},
               "phy": {"subchannel_rbs": 10, "bandwidth_mhz": 20}},
    # 20 ms reservations kept with probability 0.5, the ITS-G5 model's dual-slope law with fading
    # the bench's platoons of 8 over 11 km (six cut-off radii), ETSI rules, interest pairs traced
    "long_road": {"generation": {"mode": "etsi"}},
    "lte_rri20": {"sps": {"rri_ms": 20, "p_keep": 0.5, "t2_ms": 20, "delay_budget_ms": 20},
                  "propagation": {"path_loss": "dual_slope", "fading": "nakagami"}, "packet_bytes": 100,
                  "generation": {"mode": "fixed_rate", "fixed_rate_hz": 50}, "trace": "all"},
}
"""Channel blocks of the hashed runs."""

SIZES = {"congestion": 240, "nr_dynamic": 160, "nr_sps": 120, "lte_rri20": 100, "long_road": 400}
DENSE = {"congestion"}  # stations packed into 1 km instead of 5


def _layout(n: int, dense: bool, platoons: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start positions and axis (0 along x, 1 along y) of ``n`` stations: two lanes and a crossing road, or
    (``platoons``) one lane of platoons of 8, 20 m apart, 80 m between platoons."""
    if platoons:
        i = np.arange(n)
        return -i * 20.0 - (i // 8) * 60.0, np.zeros(n), np.zeros(n, np.int64)
    rng = np.random.default_rng(7)
    length = 1000.0 if dense else 5000.0
    cross = n // 8
    along = n - cross
    x = np.sort(rng.uniform(0.0, length, along))
    lane = np.arange(along) % 2
    y = 4.0 * lane
    cx = np.full(cross, length * 0.6)
    cy = np.sort(rng.uniform(-1500.0, 1500.0, cross))
    axis = np.concatenate([np.zeros(along, np.int64), np.ones(cross, np.int64)])
    return np.concatenate([x, cx]), np.concatenate([y, cy]), axis


def run(name: str, seconds: float = 2.5, seed: int = 11) -> dict[str, str]:
    """Digests of one run of configuration ``name``: trace, load, triggers, deliveries, metrics."""
    params = CONFIGS[name]
    n = SIZES.get(name, 200)
    x0, y0, axis = _layout(n, name in DENSE, name == "long_road")
    ids = np.arange(1, n + 1, dtype=np.int64)
    phase = np.linspace(0.0, 2.0 * np.pi, n, endpoint=False)
    model = Cv2xChannel(params, seed, None)
    model.spawn([RobotSpec(id=int(i), name=f"v{i}") for i in ids])
    alive = np.ones(n, bool)
    leave, join = ids[::17][:6], n + 1 + np.arange(5, dtype=np.int64)  # despawn at 1.0 s, spawn at 1.5 s
    extra_x = np.linspace(100.0, 900.0, len(join))
    hashes = {k: hashlib.sha256() for k in ("trace", "load", "triggers", "deliveries")}
    for k in range(round(seconds * 100) + 1):
        t_ns = k * 10_000_000
        t = t_ns / 1e9
        if t_ns == 1_000_000_000 and name == "etsi":
            model.despawn(leave.tolist())
            alive[leave - 1] = False
        if t_ns == 1_500_000_000 and name == "etsi":
            model.spawn([RobotSpec(id=int(i), name=f"v{i}", spawn_ns=t_ns) for i in join])
        v = 25.0 + 5.0 * np.sin(2.0 * np.pi * t / 3.0 + phase)
        s = 25.0 * t - 15.0 / np.pi * np.cos(2.0 * np.pi * t / 3.0 + phase)  # integral of v, up to a constant
        x = np.where(axis == 0, x0 + s, x0)
        y = np.where(axis == 1, y0 + s, y0)
        yaw = np.where(axis == 0, 0.0, np.pi / 2)
        row_ids = ids[alive]
        xs, ys, yaws, vs = x[alive], y[alive], yaw[alive], v[alive]
        if t_ns >= 1_500_000_000 and name == "etsi":
            row_ids = np.concatenate([row_ids, join])
            xs = np.concatenate([xs, extra_x + 20.0 * t])
            ys = np.concatenate([ys, np.full(len(join), 8.0)])
            yaws = np.concatenate([yaws, np.zeros(len(join))])
            vs = np.concatenate([vs, np.full(len(join), 20.0)])
        m = len(row_ids)
        order = np.lexsort((xs, axis[np.minimum(row_ids, n) - 1]))
        interest = Interest(row_ids[order[1:]], row_ids[order[:-1]])
        estimate = {"id": row_ids, "x": xs, "y": ys, "yaw": yaws, "v": vs, "a": np.zeros(m),
                    "yaw_rate": np.zeros(m)}
        out = model.step(t_ns, estimate, interest)
        for key, part in (("deliveries", out), ("trace", model.drain_records()), ("load", model.drain_load()),
                          ("triggers", model.drain_triggers())):
            for col in sorted(part):
                arr = np.ascontiguousarray(part[col])
                hashes[key].update(f"{col}:{arr.dtype.str}:{arr.shape}".encode())
                hashes[key].update(arr.tobytes())
    digests = {key: h.hexdigest()[:16] for key, h in hashes.items()}
    metrics = json.dumps(model.metrics(), sort_keys=True, default=str)
    digests["metrics"] = hashlib.sha256(metrics.encode()).hexdigest()[:16]
    return digests


if __name__ == "__main__":
    import time

    for config in CONFIGS:
        t0 = time.process_time()
        print(f'"{config}": {run(config)},  # {time.process_time() - t0:.1f} s CPU', flush=True)
