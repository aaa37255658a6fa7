"""The cv2x channel's pieces: transport block sizes and subchannels, the link-level curve, the sensing-based
selection (half-duplex and RSRP exclusions, the +3 dB rule, the best 20 %), the reselection counter and its causes,
half-duplex receptions, the channel busy ratio, and bit-identical runs for a seed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from comms_models.base import Interest
from comms_models.cv2x.bler import REFERENCE_EFFICIENCY, bler, bler_reference, sinr_shift_db
from comms_models.cv2x.log import RESELECTIONS
from comms_models.cv2x.model import Cv2xChannel
from comms_models.cv2x.params import Cv2xParams, PhyParams, SpsParams
from comms_models.cv2x.reception import LOSS_CAUSES
from comms_models.cv2x.sensing import Sensed
from comms_models.cv2x.sps import select
from comms_models.cv2x.tbs import capacity_bytes, efficiency_bits_per_re, mcs_to_itbs, subchannels_needed, tbs_bits
from core.robots import RobotSpec

FIXED_190 = {"generation": {"mode": "fixed_rate", "fixed_rate_hz": 10}, "packet_bytes": 190}


def run_line(n: int, spacing_m: float, seconds: float, params: Mapping[str, Any], seed: int = 1,
             interest: Interest | None = None) -> tuple[Cv2xChannel, dict[str, np.ndarray], list, dict]:
    """``n`` static stations every ``spacing_m`` on a line, stepped at 10 ms: the model, its log, the deliveries
    of every step and its channel load."""
    model = Cv2xChannel(params, seed, None)
    ids = np.arange(1, n + 1, dtype=np.int64)
    model.spawn([RobotSpec(id=int(i), name=f"v{i}") for i in ids])
    zeros = np.zeros(n)
    estimate = {"id": ids, "x": np.arange(n) * spacing_m, "y": zeros, "yaw": zeros, "v": zeros, "a": zeros,
                "yaw_rate": zeros}
    interest = interest or Interest(np.empty(0, np.int64), np.empty(0, np.int64))
    logs, loads, deliveries = [], [], []
    for k in range(round(seconds * 100) + 1):
        deliveries.append(model.step(k * 10_000_000, estimate, interest))
        logs.append(model.drain_records())
        loads.append(model.drain_load())
    log = {c: np.concatenate([part[c] for part in logs]) for c in logs[0]}
    load = {c: np.concatenate([part[c] for part in loads]) for c in loads[0]}
    return model, log, deliveries, load


# -- resources ---------------------------------------------------------------------------------------------------
def test_transport_block_sizes_follow_ts_36213() -> None:
    """Table 7.1.7.2.1-1 values and the MCS -> I_TBS mapping of Table 8.6.1-1."""
    assert mcs_to_itbs(0) == (2, 0) and mcs_to_itbs(10) == (2, 10) and mcs_to_itbs(11) == (4, 10)
    assert mcs_to_itbs(20) == (4, 19) and mcs_to_itbs(28) == (6, 26)
    assert tbs_bits(9, 10) == 1544  # 190 bytes (1520 bits) fit 10 PRBs at MCS 9
    assert tbs_bits(8, 10) == 1384  # ... and not at MCS 8
    assert tbs_bits(0, 2) == 32 and tbs_bits(28, 100) == 75376 and tbs_bits(13, 57) == 12960
    with pytest.raises(ValueError):
        tbs_bits(9, 101)
    # the paper's configuration: QPSK at code rate 0.73 on 10 PRBs x 12 subcarriers x 9 data symbols
    assert efficiency_bits_per_re(9, 10) == pytest.approx((1544 + 24) / 1080)


def test_a_message_occupies_the_subchannels_its_size_needs() -> None:
    """12-RB subchannels carry 10 PSSCH PRBs (SCI adjacent): 193 bytes at MCS 9, 437 on two, 903 on all four."""
    assert capacity_bytes(9, 12, 4) == (193, 437, 669, 903)
    assert subchannels_needed(np.array([1, 190, 193, 194, 437, 438, 903, 904]), 9, 12, 4).tolist() == \
        [1, 1, 1, 2, 2, 3, 4, 0]
    assert PhyParams().n_subchannels == 4 and PhyParams(bandwidth_mhz=20, subchannel_rbs=10).n_subchannels == 10
    with pytest.raises(ValidationError):
        PhyParams(subchannel_rbs=11)


def test_the_link_curve_is_r1_160284_shifted_by_the_code_rate() -> None:
    """The reference curve's points; no shift for its own transport block, to the right for a denser code."""
    assert bler_reference(np.array([-5.0, 0.0, 6.0, 10.0, 21.0])).tolist() == [1.0, 1.0, 0.4, 0.045, 1e-4]
    assert abs(REFERENCE_EFFICIENCY - 1.452) < 1e-3
    assert sinr_shift_db(9, np.array([10]))[0] == pytest.approx(0.0)
    assert sinr_shift_db(14, np.array([10]))[0] > 3.0  # 16QAM: several dB more SINR
    assert sinr_shift_db(4, np.array([10]))[0] < -2.0
    assert bler(np.array([9.0]), 3.0)[0] == pytest.approx(bler_reference(np.array([6.0]))[0])


# -- selection ----------------------------------------------------------------------------------------------------
def _sensed(own: list[int] | None = None, res: list[tuple[int, int, int, float]] | None = None,
            rssi: np.ndarray | None = None) -> Sensed:
    res = res or []
    return Sensed(own_sf=np.array(own or [], np.int64), res_sf=np.array([r[0] for r in res], np.int64),
                  res_x0=np.array([r[1] for r in res], np.int64), res_len=np.array([r[2] for r in res], np.int64),
                  res_rri=np.full(len(res), 100, np.int64), res_power_dbm=np.array([r[3] for r in res], float),
                  rssi_mw=np.zeros((100, 4)) if rssi is None else rssi)


def _picks(sensed: Sensed, n: int = 1000, draws: int = 400, length: int = 1) -> list:
    rng = np.random.default_rng(0)
    cells = 100 * (4 - length + 1)
    return [select(n, length, 100, SpsParams(), 4, sensed, float(rng.random()), rng.random(cells))
            for _ in range(draws)]


def test_selection_skips_the_subframes_the_station_could_not_sense() -> None:
    """Half-duplex (step 5): no candidate in a subframe 100 ms after one the station transmitted in."""
    picks = _picks(_sensed(own=[970, 485]))
    phases = {p.sf % 100 for p in picks}
    assert 70 not in phases and 85 not in phases
    assert len(phases) > 80  # every other subframe of the window is chosen at some point
    assert all(1001 <= p.sf <= 1100 for p in picks)


def test_selection_excludes_reservations_heard_above_the_rsrp_threshold() -> None:
    """Step 6: the best-ranked candidate is taken unless a reservation received above -90.5 dBm covers it."""
    rssi = np.ones((100, 4))
    rssi[50, 2] = 0.0  # the quietest candidate: subframe 1050, subchannel 2
    free = select(1000, 1, 100, SpsParams(), 4, _sensed(res=[(950, 2, 1, -95.0)], rssi=rssi), 0.0, np.zeros(400))
    assert (free.sf, free.x0) == (1050, 2)  # heard below the threshold: not excluded
    busy = select(1000, 1, 100, SpsParams(), 4, _sensed(res=[(950, 2, 1, -80.0)], rssi=rssi), 0.0, np.zeros(400))
    assert (busy.sf, busy.x0) != (1050, 2) and busy.threshold_dbm == -90.5
    # a two-subchannel candidate overlapping the reservation by one subchannel is excluded too
    wide = select(1000, 2, 100, SpsParams(), 4, _sensed(res=[(950, 2, 1, -80.0)], rssi=rssi[:, :]), 0.0,
                  np.zeros(300))
    assert not (wide.sf == 1050 and wide.x0 in (1, 2))


def test_the_threshold_rises_by_3_db_until_a_fifth_of_the_candidates_remain() -> None:
    """Step 7: reservations at -85 dBm on 90 % of the candidates: -90.5 and -87.5 dBm leave too few, -84.5 all."""
    res = [(900 + s, c, 1, -85.0) for s in range(100) for c in range(4) if (s * 4 + c) % 10]
    sel = select(1000, 1, 100, SpsParams(), 4, _sensed(res=res), 0.5, np.zeros(400))
    assert sel.threshold_dbm == pytest.approx(-84.5)
    assert sel.remaining == sel.candidates == 400
    # with the strongest at -70 dBm, the loop stops as soon as 20 % remain
    res = [(900 + s, c, 1, -85.0 if (s * 4 + c) % 10 < 5 else -70.0) for s in range(100) for c in range(4)
           if (s * 4 + c) % 10]
    sel = select(1000, 1, 100, SpsParams(), 4, _sensed(res=res), 0.5, np.zeros(400))
    assert sel.threshold_dbm == pytest.approx(-84.5) and sel.remaining == 200


def test_the_choice_is_among_the_fifth_with_the_lowest_s_rssi() -> None:
    """Steps 8-10: every pick is among the 80 of 400 candidates with the lowest average S-RSSI."""
    rssi = np.random.default_rng(3).random((100, 4))
    picks = _picks(_sensed(rssi=rssi))
    limit = np.sort(rssi.ravel())[79]
    chosen = np.array([rssi[p.sf % 100, p.x0] for p in picks])
    assert np.all(chosen <= limit)
    assert len({(p.sf, p.x0) for p in picks}) > 60  # and uniformly among them, not always the best


# -- the reselection counter -----------------------------------------------------------------------------------------
def _reservation_lengths(log: Mapping[str, np.ndarray]) -> np.ndarray:
    """Transmissions per reservation: runs that start and end with a counter reselection."""
    tx = log["event"] == 0
    tx &= log["outcome"] == 0  # sent
    lengths = []
    for station in np.unique(log["sender"][tx]):
        mine = tx & (log["sender"] == station)
        starts = np.flatnonzero(log["reselection"][mine] == RESELECTIONS.index("counter"))
        lengths.extend(np.diff(starts).tolist())
    return np.array(lengths)


def test_the_reselection_counter_is_uniform_between_5_and_15() -> None:
    """TS 36.321: with P_keep 0 a reservation carries 5..15 transmissions, each count equally likely."""
    _, log, _, _ = run_line(80, 50.0, 20.0, FIXED_190)
    lengths = _reservation_lengths(log)
    assert len(lengths) > 1000
    assert lengths.min() == 5 and lengths.max() == 15
    counts = np.bincount(lengths, minlength=16)[5:16]
    expected = len(lengths) / 11
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 29.6, counts  # chi-square, 10 degrees of freedom, p = 0.001
    assert lengths.mean() == pytest.approx(10.0, abs=0.3)


def test_the_counter_range_scales_with_the_reservation_interval_and_p_keep_keeps() -> None:
    """[10, 30] at 50 ms (and [25, 75] at 20 ms); P_keep 0.8 keeps four in five expired reservations."""
    assert SpsParams(rri_ms=20).counter_range == (25, 75) and SpsParams(rri_ms=200).counter_range == (5, 15)
    params = {"generation": {"mode": "fixed_rate", "fixed_rate_hz": 20}, "packet_bytes": 190,
              "sps": {"rri_ms": 50, "t2_ms": 50, "delay_budget_ms": 50}}
    _, log, _, _ = run_line(40, 50.0, 12.0, params)
    lengths = _reservation_lengths(log)
    assert len(lengths) > 100 and lengths.min() >= 10 and lengths.max() <= 30 and lengths.max() >= 27
    assert lengths.mean() == pytest.approx(20.0, abs=1.0)
    model0, *_ = run_line(40, 50.0, 10.0, FIXED_190)
    model8, *_ = run_line(40, 50.0, 10.0, {**FIXED_190, "sps": {"p_keep": 0.8}})
    expired0 = model0.log.reselections["counter"]
    expired8 = model8.log.reselections["counter"]
    assert expired8 / expired0 == pytest.approx(0.2, abs=0.06)


def test_reselections_follow_messages_that_do_not_fit_in_size_or_time() -> None:
    """ETSI CAMs with the low-frequency container need a second subchannel (size); a 200 ms reservation misses
    the 100 ms delay budget (latency)."""
    sized = {"generation": {"mode": "fixed_rate", "fixed_rate_hz": 10}, "security_bytes": 107}
    model, log, _, _ = run_line(20, 50.0, 4.0, sized)
    assert model.packet_bytes == {False: 192, True: 194}  # a 41 / 43-byte CAM, 44 bytes of headers, 107 security
    tx = (log["event"] == 0) & (log["outcome"] == 0)
    size = tx & (log["reselection"] == RESELECTIONS.index("size"))
    assert model.log.reselections["size"] > 20 and np.all(log["subchannels"][size] == 2)
    late = {**FIXED_190, "sps": {"rri_ms": 200}}
    model, log, _, _ = run_line(20, 50.0, 4.0, late)
    assert model.log.reselections["latency"] > 100


# -- reception and load ----------------------------------------------------------------------------------------------
def test_a_station_receives_nothing_in_a_subframe_it_transmits_in() -> None:
    """Every half-duplex loss is a receiver that transmitted in that subframe, and every such link is one."""
    _, log, _, _ = run_line(60, 20.0, 3.0, {**FIXED_190, "trace": "all"})
    tx = log["event"] == 0
    sent = set(zip(log["sender"][tx & (log["subframe"] >= 0)].tolist(), log["subframe"][tx & (log["subframe"] >= 0)]
                   .tolist(), strict=True))
    rx = log["event"] == 1
    busy = np.array([(r, s) in sent for r, s in zip(log["receiver"][rx].tolist(), log["subframe"][rx].tolist(),
                                                    strict=True)])
    hd = log["loss"][rx] == LOSS_CAUSES.index("half_duplex")
    assert hd.sum() > 100
    assert np.array_equal(busy, hd)


def test_trace_rows_carry_the_resource_and_the_power_the_link_had() -> None:
    """tx rows: subframe, subchannel, subchannels, reselection; rx rows: the power ``Propagation`` gives that link
    (the value the receiver's own sensing uses) and the outcome mapped from the loss cause."""
    model, log, _, _ = run_line(30, 40.0, 1.5, {**FIXED_190, "trace": "all"})
    tx = log["event"] == 0
    assert np.all(log["t_ns"][tx] == log["subframe"][tx] * 1_000_000)
    assert set(np.unique(log["subchannel"][tx]).tolist()) == {0, 1, 2, 3}
    assert np.all(log["subchannels"][tx] == 1)
    rx = np.flatnonzero(log["event"] == 1)
    d = np.abs(log["sender"][rx] - log["receiver"][rx]) * 40.0
    expected = model.prop.rx_dbm(d, log["sender"][rx], log["receiver"][rx], log["subframe"][rx])
    assert np.array_equal(expected, log["rx_power_dbm"][rx])
    assert np.all((log["outcome"][rx] == 1) == (log["loss"][rx] == 0))


def test_the_channel_busy_ratio_counts_the_subchannels_sensed_above_minus_94_dbm() -> None:
    """A lone station at 10 Hz on one of four subchannels: 1 of 400 subchannel-subframes per 100 ms; two side by
    side see both; two 10 km apart only their own."""
    _, _, _, load = run_line(1, 10.0, 2.0, FIXED_190)
    assert np.all(load["t_ns"] % 100_000_000 == 0) and len(load["t_ns"]) == 20
    assert np.allclose(load["cbr"][1:], 0.0025)
    _, _, _, near = run_line(2, 10.0, 2.0, FIXED_190)
    _, _, _, far = run_line(2, 10_000.0, 2.0, FIXED_190)
    assert np.allclose(near["cbr"][4:], 0.005) and np.allclose(far["cbr"][4:], 0.0025)


def test_the_same_seed_gives_the_same_run_and_another_seed_another() -> None:
    """Every draw is keyed: two runs with one seed are bit-identical (log, deliveries, load)."""
    pairs = Interest(np.arange(2, 31, dtype=np.int64), np.arange(1, 30, dtype=np.int64))
    params = {"generation": {"mode": "etsi"}, "trace": "all"}
    first = run_line(30, 30.0, 3.0, params, seed=5, interest=pairs)
    second = run_line(30, 30.0, 3.0, params, seed=5, interest=pairs)
    third = run_line(30, 30.0, 3.0, params, seed=6, interest=pairs)
    for a, b in ((first[1], second[1]), (first[3], second[3])):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(first[2], second[2], strict=True) for k in a)
    assert sum(len(d["receiver"]) for d in first[2]) > 50  # ETSI rules, standing still: a CAM a second
    assert not np.array_equal(first[1]["subframe"], third[1]["subframe"])


def test_parameters_are_checked() -> None:
    """Unknown keys, a reservation interval 3GPP does not have and a window ending before it starts are errors."""
    for bad in ({"nope": 1}, {"sps": {"rri_ms": 30}}, {"sps": {"t1_ms": 4, "t2_ms": 4}}, {"phy": {"mcs": 21}}):
        with pytest.raises(ValidationError):
            Cv2xParams.model_validate(bad)
