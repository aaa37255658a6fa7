"""A highway of moving vehicles on which the cv2x and itsg5 channels carry either periodic fixed-size messages or
ETSI CAMs of variable size and interval: the setting of Molina-Masegosa, Gozalvez, Sepulcre, "Comparison of IEEE
802.11p and LTE-V2X: An Evaluation With Periodic and Aperiodic Messages of Constant and Variable Size", IEEE Access
8, 2020 (``test_cv2x_variable_traffic`` asserts its qualitative results; the figure in docs/v2x.md is drawn from
``run``).

Vehicles every 1/beta metres (lanes folded onto one line) drive at 25 m/s on average; each one's speed swings by
+-5 m/s with a 10 s period and its own phase, so the CA basic service's position and speed triggers (EN 302 637-2)
give intervals of 130 to 210 ms that change from CAM to CAM. Relative positions move by at most 16 m, so the
measured pairs keep their distance.

Traffic patterns:

- ``periodic``: 190 bytes every 100 ms (the analytical model's traffic, a reservation fits every message);
- ``etsi``: the ETSI generation rules; a CAM is 41 bytes (UPER) plus 44 of GeoNetworking and BTP headers plus a
  security envelope of 100 bytes when signed with the signer's digest; every 500 ms or more its low-frequency
  container with 23 path-history points makes it 241 bytes, and once a second the certificate replaces the digest
  (130 bytes more). Messages of 185, 315, 385 or 515 bytes: 1, 2, 2 or 3 subchannels at MCS 9. (The envelope sizes
  are estimates from the TS 103 097 structures: an ECDSA P-256 signature, header fields and an 8-byte digest, or
  an authorisation ticket; the measured CAMs of the paper's companion study run from about 200 to over 700 bytes.)

Both technologies use the ITS-G5 model's propagation (dual slope, its shadowing, Nakagami fading) at 23 dBm; each
keeps its own receiver (cv2x sensing threshold -90.5 dBm, itsg5 -85 dBm). ITS-G5 carries messages of the same mean
size (one size per message kind is all its model has; its CSMA/CA has no reservation a size could break) and both
run without congestion control, as in the paper. Stepped every 1 ms, so messages are generated at any millisecond.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from comms_models import COMMS_MODELS
from comms_models.base import OUTCOMES, Interest
from comms_models.cv2x.reception import LOSS_CAUSES
from core.robots import RobotSpec

ROAD_M = 3000.0
TX_SPAN_M = 150.0  # transmitters within this distance of the platoon's middle
RANGE_M = 500.0
BIN_M = 50.0
WARM_S = 2.0
MEAN_SPEED = 25.0
SWING = 5.0  # [m/s] speed amplitude
PERIOD_S = 10.0
CAM_BYTES, HEADERS_BYTES, DIGEST_BYTES, CERT_BYTES, PATH_POINTS = 41, 44, 100, 130, 23
PROPAGATION = {"path_loss": "dual_slope", "fading": "none"}
PATTERNS = ("periodic", "etsi")
NEAR_M = 150.0  # collisions by announcement are counted on receptions within this distance
RRI_MS = 100  # the reservation interval (cv2x default)
RECEIVED = OUTCOMES.index("received")


@dataclass
class Outcome:
    """One run: per distance bin the PDR, and the run's counts."""

    channel: str
    pattern: str
    edges_m: np.ndarray
    pdr: np.ndarray
    count: np.ndarray
    metrics: dict[str, Any]
    extra: dict[str, float] = field(default_factory=dict)


def cv2x_params(pattern: str) -> dict[str, Any]:
    """The cv2x channel block of ``pattern``."""
    base = {"propagation": PROPAGATION, "trace": "interest"}
    if pattern == "periodic":
        return {**base, "generation": {"mode": "fixed_rate", "fixed_rate_hz": 10}, "packet_bytes": 190}
    return {**base, "generation": {"mode": "etsi"}, "security_bytes": DIGEST_BYTES,
            "path_history_points": PATH_POINTS, "certificate_bytes": CERT_BYTES}


def itsg5_params(pattern: str, mean_bytes: float) -> dict[str, Any]:
    """The itsg5 channel block of ``pattern``, its frames carrying ``mean_bytes`` at the GeoNetworking layer."""
    security = max(0, round(mean_bytes) - HEADERS_BYTES - CAM_BYTES)
    generation = ({"mode": "fixed_rate", "fixed_rate_hz": 10} if pattern == "periodic" else {"mode": "etsi"})
    return {"generation": generation, "security_bytes": security, "dcc": {"mode": "off"}, "pcap": False,
            "codec_sample_rate": 0.0, "radio": {"fading": PROPAGATION["fading"]}}


def _x(t_s: np.ndarray, rows: np.ndarray, x0: np.ndarray, phase: np.ndarray) -> np.ndarray:
    """Positions of vehicles ``rows`` at times ``t_s`` without the common drift (only distances matter)."""
    w = 2 * np.pi / PERIOD_S
    return x0[rows] + SWING / w * (np.sin(w * t_s + phase[rows]) - np.sin(phase[rows]))


def _motion(n: int, t_s: float, x0: np.ndarray, phase: np.ndarray) -> dict[str, np.ndarray]:
    w = 2 * np.pi / PERIOD_S
    x = x0 + MEAN_SPEED * t_s + SWING / w * (np.sin(w * t_s + phase) - np.sin(phase))
    zeros = np.zeros(n)
    return {"x": x, "y": zeros, "yaw": zeros, "v": MEAN_SPEED + SWING * np.cos(w * t_s + phase),
            "a": -SWING * w * np.sin(w * t_s + phase), "yaw_rate": zeros}


def run(channel: str, pattern: str, beta: float, seconds: float = 6.0, seed: int = 1,
        mean_bytes: float = 190.0) -> Outcome:
    """PDR over distance of ``channel`` with traffic ``pattern`` at ``beta`` vehicles per metre."""
    n = int(ROAD_M * beta)
    ids = np.arange(1, n + 1, dtype=np.int64)
    x0 = np.arange(n) / beta
    phase = np.random.default_rng(seed).uniform(0, 2 * np.pi, n)
    params = cv2x_params(pattern) if channel == "cv2x" else itsg5_params(pattern, mean_bytes)
    model = COMMS_MODELS.get(channel)(params, seed, None)
    model.spawn([RobotSpec(id=int(i), name=f"v{i}") for i in ids])
    tx = np.flatnonzero(np.abs(x0 - ROAD_M / 2) <= TX_SPAN_M)
    pairs = np.array([(r, t) for t in tx for r in np.flatnonzero((np.abs(x0 - x0[t]) <= RANGE_M + 20)
                                                                    & (np.arange(n) != t))], np.int64)
    interest = Interest(ids[pairs[:, 0]], ids[pairs[:, 1]])
    dist, ok, tx_keys, tx_fresh, rx_keys, rx_loss = [], [], [], [], [], []
    for k in range(round(seconds * 1000) + 1):
        t_s = k / 1000
        est = _motion(n, t_s, x0, phase)
        model.step(k * 1_000_000, {"id": ids, **est}, interest)
        log = model.drain_records()
        model.drain_load()
        rx = (log["event"] == 1) & (log["generated_ns"] >= WARM_S * 1e9)
        if rx.any():  # the distance between sender and receiver when the message was generated
            t_gen = log["generated_ns"][rx] / 1e9
            s, r = log["sender"][rx] - 1, log["receiver"][rx] - 1
            dist.append(np.abs(_x(t_gen, s, x0, phase) - _x(t_gen, r, x0, phase)))
            ok.append(log["outcome"][rx] == RECEIVED)
            if channel == "cv2x":
                rx_keys.append((log["sender"][rx] << 32) | log["subframe"][rx])
                rx_loss.append(log["loss"][rx])
        sent = (log["event"] == 0) & (log["outcome"] == OUTCOMES.index("sent"))
        if channel == "cv2x" and sent.any():
            tx_keys.append((log["sender"][sent] << 32) | log["subframe"][sent])
            tx_fresh.append(log["reselection"][sent] != 0)
    d, good = np.concatenate(dist), np.concatenate(ok)
    edges = np.arange(0.0, RANGE_M + BIN_M / 2, BIN_M)
    bins = np.digitize(d, edges) - 1
    inside = (bins >= 0) & (bins < len(edges) - 1)
    count = np.bincount(bins[inside], minlength=len(edges) - 1)
    pdr = np.bincount(bins[inside], weights=good[inside], minlength=len(edges) - 1) / np.maximum(count, 1)
    near = d < NEAR_M
    extra = _collisions_by_resource(tx_keys, tx_fresh, [np.concatenate(rx_keys)[near]],
                                    [np.concatenate(rx_loss)[near]]) if channel == "cv2x" else {}
    return Outcome(channel, pattern, edges, pdr, count, model.metrics(), extra)


def _collisions_by_resource(tx_keys: list, tx_fresh: list, rx_keys: list, rx_loss: list) -> dict[str, float]:
    """Share of the measured receptions lost to collision for announced transmissions (on a reservation whose
    previous transmission, one reservation interval before, announced it in its SCI) and unannounced ones (a
    resource just selected, or a reservation whose occasions went unused in between: what others excluded was
    the skipped occasion); and the share of unannounced transmissions."""
    keys, fresh = np.concatenate(tx_keys), np.concatenate(tx_fresh)
    order = np.argsort(keys)  # by sender, then subframe
    keys, fresh = keys[order], fresh[order]
    sender, sf = keys >> 32, keys & 0xFFFFFFFF
    after_one_interval = np.zeros(len(keys), bool)
    after_one_interval[1:] = (sender[1:] == sender[:-1]) & (sf[1:] - sf[:-1] == RRI_MS)
    announced = after_one_interval & ~fresh
    rk, loss = np.concatenate(rx_keys), np.concatenate(rx_loss)
    at = np.searchsorted(keys, rk)
    assert np.all(keys[at] == rk)
    on = announced[at]
    collision = loss == LOSS_CAUSES.index("collision")
    return {"collision_announced": float(collision[on].mean()), "collision_unannounced": float(collision[~on].mean()),
            "collision_near": float(collision.mean()), "unannounced_share": float(1.0 - announced.mean())}
