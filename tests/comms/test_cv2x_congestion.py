"""Channel busy ratio and congestion control of the cv2x channel (TS 36.214 5.1.30 / 5.1.31, TS 36.213 14.1.1.4C,
ETSI TS 103 574).

The CBR is checked against the occupancy that follows from the traffic: stations that hear each other above the
RSRP threshold reserve disjoint resources, so a station's window of 100 subframes x 4 subchannels holds
stations x subchannels per message x messages per window busy cells, counting only the stations received above
-94 dBm per subchannel. The CR limits are checked on the trace: every transmission of every station, with the
subchannels it used in the 999 subframes before, stays within the limit for the CBR of its last window.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from comms_models.base import Interest
from comms_models.cv2x.model import Cv2xChannel
from comms_models.cv2x.params import Cv2xParams
from core.robots import RobotSpec

NO_PAIRS = Interest(np.empty(0, np.int64), np.empty(0, np.int64))


def run_clusters(sizes: tuple[int, ...], at_m: tuple[float, ...], seconds: float, params: dict[str, Any],
                 seed: int = 1) -> tuple[Cv2xChannel, dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:
    """Clusters of static stations (``sizes[i]`` of them 0.5 m apart from ``at_m[i]`` on a line), stepped at
    10 ms: the model, its log, its channel load and each station's cluster."""
    x = np.concatenate([a + 0.5 * np.arange(n) for n, a in zip(sizes, at_m, strict=True)])
    cluster = np.repeat(np.arange(len(sizes)), sizes)
    n = len(x)
    ids = np.arange(1, n + 1, dtype=np.int64)
    model = Cv2xChannel(params, seed, None)
    model.spawn([RobotSpec(id=int(i), name=f"v{i}") for i in ids])
    zeros = np.zeros(n)
    estimate = {"id": ids, "x": x, "y": zeros, "yaw": zeros, "v": zeros, "a": zeros, "yaw_rate": zeros}
    logs, loads = [], []
    for k in range(round(seconds * 100) + 1):
        model.step(k * 10_000_000, estimate, NO_PAIRS)
        logs.append(model.drain_records())
        loads.append(model.drain_load())
    log = {c: np.concatenate([p[c] for p in logs]) for c in logs[0]}
    load = {c: np.concatenate([p[c] for p in loads]) for c in loads[0]}
    return model, log, load, cluster


# free space, no shadowing or fading: who is above -94 dBm is a matter of distance (2.9 km at 23 dBm)
FREE = {"propagation": {"path_loss": "free_space", "cutoff_power_dbm": -115.0},
        "generation": {"mode": "fixed_rate", "fixed_rate_hz": 10}}


def _occupied(log: dict[str, np.ndarray], heard: np.ndarray, window: int) -> float:
    """Share of the 100 x 4 subchannel-subframes of window ``window`` (subframes 100 w .. 100 w + 99) that a
    transmission of a station of mask ``heard`` (indexed by id - 1) occupied."""
    sent = (log["event"] == 0) & (log["subframe"] // 100 == window)
    sent &= heard[log["sender"] - 1]
    cells = {(sf + c) for sf, x0, n in zip(log["subframe"][sent].tolist(), log["subchannel"][sent].tolist(),
                                            log["subchannels"][sent].tolist(), strict=True)
             for c in (1j * x for x in range(x0, x0 + n))}
    return len(cells) / 400


@pytest.mark.slow
def test_the_cbr_is_the_occupancy_of_the_stations_heard_above_minus_94_dbm() -> None:
    """Three clusters of 120 stations, 190-byte messages (one subchannel) every 100 ms, the second 1 km away
    (-85 dBm: SCIs decoded, reservations excluded), the third 5 km (-99 dBm, under -94 dBm). In every window from
    2 s on, a station of the first cluster measures the share of the 400 subchannel-subframes that the
    first two clusters' transmissions occupied; that is the (120 + 120) x 1 / 400 = 0.60 of stations x
    subchannels / (100 ms x 4 subchannels) less the resources two stations share (0.55: two that reselect within
    the same 100 ms cannot see each other's new reservation), and far from the 0.90 of all three clusters."""
    _, log, load, cluster = run_clusters((120, 120, 120), (0.0, 1000.0, 5000.0), 4.0, {**FREE, "packet_bytes": 190})
    late = load["t_ns"] >= 2_000_000_000
    first = late & (cluster[load["robot"] - 1] == 0)
    for t_ns in np.unique(load["t_ns"][first]):
        at = first & (load["t_ns"] == t_ns)
        # within two cells: where three far transmissions overlap, their sum passes -94 dBm too
        assert np.all(np.abs(load["cbr"][at] - _occupied(log, cluster <= 1, int(t_ns // 100_000_000) - 1)) <= 0.005)
    expected = (120 + 120) * 1 / (100 * 4)
    assert 0.88 * expected < load["cbr"][first].mean() <= expected
    # the far cluster counts its own 120 and, of the middle one 4 km away (-97 dBm), only cells where two overlap
    far = late & (cluster[load["robot"] - 1] == 2)
    assert 0.88 * 0.3 < load["cbr"][far].mean() <= 0.3 + 0.03
    # two subchannels per message (300 bytes) double the occupancy
    _, _, load2, cluster2 = run_clusters((60, 60), (0.0, 1000.0), 4.0, {**FREE, "packet_bytes": 300})
    first2 = (load2["t_ns"] >= 2_000_000_000) & (cluster2[load2["robot"] - 1] == 0)
    assert 0.88 * 0.6 < load2["cbr"][first2].mean() <= 0.6


def _cr_at_each_transmission(log: dict[str, np.ndarray], n_sub: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per transmission: its sender, subframe and the sender's CR (its subchannels in [k - 999, k] / 1000 n_sub),
    recomputed from the trace."""
    sent = (log["event"] == 0) & (log["subframe"] >= 0)
    sender, sf, width = log["sender"][sent], log["subframe"][sent], log["subchannels"][sent]
    cr = np.empty(len(sf))
    for s in np.unique(sender):
        mine = np.flatnonzero(sender == s)
        order = mine[np.argsort(sf[mine])]
        cum = np.concatenate([[0], np.cumsum(width[order])])
        start = np.searchsorted(sf[order], sf[order] - 999, side="left")
        cr[order] = (cum[1:] - cum[start]) / (1000 * n_sub)
    return sender, sf, cr


def _limit_in_force(load: dict[str, np.ndarray], sender: np.ndarray, sf: np.ndarray) -> np.ndarray:
    """The ETSI TS 103 574 CAM limit for the CBR of each sender's last window closed by subframe ``sf``."""
    key = load["robot"] * 10**12 + load["t_ns"] // 1_000_000
    order = np.argsort(key)
    key, cbr = key[order], load["cbr"][order]
    at = np.searchsorted(key, sender * 10**12 + sf, side="right") - 1
    found = (at >= 0) & (key[np.maximum(at, 0)] // 10**12 == sender)
    c = np.where(found, cbr[np.maximum(at, 0)], 0.0)
    return np.select([c <= 0.3, c <= 0.65, c <= 0.8], [1.0, 0.03, 0.006], 0.003)


@pytest.mark.slow
def test_with_congestion_control_no_station_exceeds_the_cr_limit_of_its_cbr() -> None:
    """280 stations side by side with 300-byte messages (two subchannels) every 100 ms load the channel to a CBR of
    0.85 (their resources overlap): above 0.8 the CAM limit is 0.003, 12 of the 4,000 subchannel-subframes of a
    second, where each station needs 20. Without control the CR is 0.005 and the CBR stays above 0.8; with control,
    every transmission keeps its station's CR within the limit of its last CBR, packets are dropped, the load
    falls."""
    params = {**FREE, "packet_bytes": 300}
    off, log_off, load_off, _ = run_clusters((280,), (0.0,), 5.0, params)
    on, log_on, load_on, _ = run_clusters((280,), (0.0,), 5.0, {**params, "congestion_control": True})
    late_off, late_on = load_off["t_ns"] >= 2_000_000_000, load_on["t_ns"] >= 2_000_000_000
    assert load_off["cbr"][late_off].mean() > 0.8
    sender, sf, cr = _cr_at_each_transmission(log_off, 4)
    assert np.mean(cr[sf >= 2000] > _limit_in_force(load_off, sender, sf)[sf >= 2000]) > 0.5
    assert off.log.cr_dropped == 0
    sender, sf, cr = _cr_at_each_transmission(log_on, 4)
    limit = _limit_in_force(load_on, sender, sf)
    assert np.all(cr <= limit + 1e-12), (cr[cr > limit][:5], limit[cr > limit][:5])
    assert on.metrics()["cams_cr_dropped"] > 1000
    assert load_on["cbr"][late_on].mean() < load_off["cbr"][late_off].mean() - 0.1


def test_congestion_control_is_off_by_default_and_its_table_is_checked() -> None:
    """Off unless asked for; the limits are ETSI TS 103 574's for CAMs; a table must rise to CBR 1."""
    assert Cv2xParams().congestion_control is False
    assert Cv2xParams().cr_limits == ((0.3, 1.0), (0.65, 0.03), (0.8, 0.006), (1.0, 0.003))
    for bad in (((0.5, 0.1), (0.4, 0.1), (1.0, 0.1)), ((0.5, 0.1),), ((0.5, 0.0), (1.0, 0.1))):
        with pytest.raises(ValidationError):
            Cv2xParams(cr_limits=bad)
