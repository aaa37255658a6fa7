"""Physical layer: airtime of known frames, path loss, the gain tables, and delivery ratio versus distance through
the whole channel (Monte Carlo against the closed forms)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from comms_models.base import Interest, with_names
from comms_models.itsg5.model import ItsG5Channel
from comms_models.itsg5.params import RadioParams
from comms_models.itsg5.radio import (
    _quantile_grid,
    airtime_ns,
    build_tables,
    cutoff_radius_m,
    gain_quantiles,
    mean_rx_power_dbm,
    nakagami_m,
    path_loss_db,
    reception_probability,
)
from core.robots import RobotSpec


# -- airtime ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("frame_bytes", "expected_us"), [
    (123, 208),  # 41-byte CAM + 82 bytes of headers: ceil(1006 / 48) = 21 symbols -> 40 + 168 us
    (100, 184),  # ceil(822 / 48) = 18 symbols
    (122, 208),  # ceil(998 / 48) = 21 symbols
    (117, 200),  # ceil(958 / 48) = 20 symbols: one byte less than 118 saves a symbol
    (118, 208),  # ceil(966 / 48) = 21 symbols
])
def test_airtime_formula(frame_bytes, expected_us):
    symbols = math.ceil((16 + 8 * frame_bytes + 6) / 48)
    assert airtime_ns(frame_bytes) == (40 + 8 * symbols) * 1000 == expected_us * 1000


def test_hf_cam_is_41_bytes_and_208_us_on_air():
    ch = ItsG5Channel({"pcap": False}, seed=0)
    assert ch.cam_bytes[False] == 41
    assert ch.frame_bytes[False] == 123
    assert ch.airtime_ns[False] == 208_000
    assert ch.cam_bytes[True] > ch.cam_bytes[False]
    signed = ItsG5Channel({"pcap": False, "security_bytes": 240}, seed=0)
    assert 520_000 <= signed.airtime_ns[False] <= 540_000  # "signed with a certificate: about 530 us"


# -- propagation ------------------------------------------------------------------------------------------------
def test_path_loss_values():
    fs = RadioParams(path_loss="free_space")
    ds = RadioParams()
    assert path_loss_db(100.0, fs) == pytest.approx(47.86 + 40.0)
    assert path_loss_db(1000.0, fs) == pytest.approx(47.86 + 60.0)
    assert path_loss_db(50.0, ds) == pytest.approx(47.86 + 20 * math.log10(50))
    assert path_loss_db(200.0, ds) == pytest.approx(47.86 + 40.0 + 40 * math.log10(2))
    assert mean_rx_power_dbm(0.0, ds) == pytest.approx(23.0 - 47.86)  # clamped to 1 m
    # Median reception range at -85 dBm: about 1 km in free space, about 300 m with the dual slope.
    assert 23 - path_loss_db(1000.0, fs) == pytest.approx(-84.86, abs=0.01)
    assert 23 - path_loss_db(318.0, ds) == pytest.approx(-85.0, abs=0.05)
    assert cutoff_radius_m(ds) == pytest.approx(100 * 10 ** ((23 + 110 - 87.86) / 40))


def test_nakagami_m_table():
    p = RadioParams()
    assert nakagami_m([1, 4.7, 4.8, 11.7, 20, 50, 72, 177.3, 178, 1000], p).tolist() == [
        3.01, 3.01, 1.18, 1.18, 1.94, 1.86, 0.45, 0.45, 0.32, 0.32]
    simple = RadioParams(nakagami_m="simple")
    assert nakagami_m([79, 81], simple).tolist() == [1.5, 0.75]


def test_distance_classes_carry_the_right_parameters():
    t = build_tables(RadioParams())
    limits = np.sqrt(t.class_limit_m2)
    assert limits[:-1] == pytest.approx([4.7, 11.7, 28.9, 71.6, 100.0, 177.3])
    assert t.class_m.tolist() == [3.01, 1.18, 1.94, 1.86, 0.45, 0.45, 0.32]
    assert t.class_sigma_db.tolist() == [5.6] * 5 + [8.1] * 2


@pytest.mark.parametrize(("sigma_db", "m"), [(0.0, 0.32), (0.0, 1.86), (8.1, 0.45), (5.6, 3.01)])
def test_gain_table_matches_the_distribution(sigma_db, m):
    # The tabulated quantiles reproduce P(gain >= g) = E_S[gammaincc(m, m g / S)] to within the table's
    # resolution (1/K per threshold).
    q = _quantile_grid()
    table = gain_quantiles(sigma_db, m, q)
    assert np.all(np.diff(table) >= 0)
    for g in (0.01, 0.1, 0.5, 1.0, 2.0, 5.0):
        tail = 1.0 - np.searchsorted(table, g) / len(q)
        z, w = np.polynomial.hermite_e.hermegauss(121)
        exact = special.gammaincc(m, m * g / 10 ** (sigma_db * z / 10)) @ (w / w.sum())
        assert tail == pytest.approx(exact, abs=2e-3)


# -- delivery ratio versus distance through the channel ----------------------------------------------------------
def pair_pdr(distances_m: list[float], params: dict, duration_s: float = 120.0, seed: int = 3) -> np.ndarray:
    """Stations in pairs at the given distances, the pairs 60 km apart; both send at 10 Hz. Returns the
    fraction of each pair's frames received by the partner (both directions): 2,400 frames per pair, so the
    binomial standard deviation is at most 0.01 and the tolerances below are 5 sigma."""
    ch = ItsG5Channel({"pcap": False, "codec_sample_rate": 0.0, "generation": {"mode": "fixed_rate"},
                       "dcc": {"mode": "off"}, **params}, seed=seed)
    k = len(distances_m)
    ids = np.arange(2 * k)
    ch.spawn([RobotSpec(id=int(i), name=f"s{i}") for i in ids])
    x = np.concatenate([[60_000.0 * p, 60_000.0 * p + d] for p, d in enumerate(distances_m)])
    est = {"id": ids, "x": x, "y": np.zeros(2 * k), "yaw": np.zeros(2 * k), "v": np.zeros(2 * k),
           "a": np.zeros(2 * k), "yaw_rate": np.zeros(2 * k)}
    partner = ids ^ 1
    interest = Interest(receivers=ids, senders=partner)
    for step in range(round(duration_s * 100)):
        ch.step(step * 10_000_000, est, interest)
    rec = with_names(ch.drain_records())
    rx = rec["event"] == "rx"
    pair = rec["sender"][rx] // 2
    ok = rec["outcome"][rx] == "received"
    return np.bincount(pair, weights=ok, minlength=k) / np.bincount(pair, minlength=k)


@pytest.mark.slow
def test_nakagami_reception_against_gammaincc():
    # Free space (no shadowing): P(rx) = gammaincc(m, m * sensitivity / mean power).
    distances = [150.0, 300.0, 600.0]
    radio = {"path_loss": "free_space"}
    pdr = pair_pdr(distances, {"radio": radio})
    p = RadioParams(**radio)
    mean_mw = 10 ** (mean_rx_power_dbm(np.array(distances), p) / 10)
    m = nakagami_m(np.array(distances), p)
    expected = special.gammaincc(m, m * 10 ** (p.sensitivity_dbm / 10) / mean_mw)
    assert pdr == pytest.approx(expected, abs=0.05)
    assert np.all(np.diff(pdr) < 0)


@pytest.mark.slow
def test_dual_slope_pdr_versus_distance():
    distances = [100.0, 200.0, 300.0]
    pdr = pair_pdr(distances, {})
    assert pdr == pytest.approx(reception_probability(distances, RadioParams()), abs=0.05)
    assert pdr == pytest.approx([0.9, 0.6, 0.3], abs=0.1)  # the measured highway figures
