"""Jammers on the ITS-G5 channel (``comms_models.attacks.jamming``, the kernel's ``J*`` rows): a jammer near a
platoon cuts the links it reaches, on reception and on channel access, and leaves far links as they were; its power
enters the SINR through the mean path loss (checked against a hand computation and the capture threshold the model
decodes with); a periodic jammer of duty cycle 1/2 loses the share of a periodic sender's frames that overlap its
on-time; a reactive jammer jams its target's frames only; a jammer at a fixed point needs no robot in a scenario."""

from __future__ import annotations

import math

import numpy as np
import pytest

from comms_models.attacks import ATTACKS
from comms_models.attacks.plan import AttackPlan, build_attacks
from comms_models.itsg5.jamming import mean_gain
from comms_models.itsg5.params import RadioParams
from comms_models.itsg5.radio import build_tables
from tests.comms.test_model import CONSTANT_DELAY, NO_RANDOM_RADIO, SIMULTANEOUS, Sim, rx_outcomes

MS = 1_000_000
JAMMERS = ("jamming_constant", "jamming_periodic", "jamming_reactive")
FREE_SPACE = {**NO_RANDOM_RADIO, "path_loss": "free_space"}
QUIET_MAC = {"latency": CONSTANT_DELAY, "dcc": {"mode": "off"}}


def jammed(sim: Sim, entries: list[dict], seed: int = 1) -> Sim:
    """``sim`` with the attacks ``entries`` (robot ids, times in ns) attached to its channel."""
    names = {f"s{i}": i for i in sim.ids}
    sim.ch.attach_attacks(AttackPlan(build_attacks(entries, seed, names)))
    return sim


def jammer(kind: str, params: dict, from_ms: int = 0, to_ms: int | None = None, robot: int = -1) -> dict:
    return {"robot": robot, "type": kind, "params": params, "from_ns": from_ms * MS,
            "to_ns": None if to_ms is None else to_ms * MS}


def test_the_jamming_tests_cover_every_jammer() -> None:
    assert sorted(n for n in ATTACKS.builtin_names() if ATTACKS.get(n).message == "air") == sorted(JAMMERS)


# -- a jammer near a platoon -------------------------------------------------------------------------------------------
NEAR = [0.0, 15.0, 30.0, 45.0]  # a platoon of four, 15 m apart
FAR = [3000.0, 3015.0, 3030.0, 3045.0]  # another one, 3 km away: beyond the cut-off radius (1,344 m) of both


def _platoons(jam: bool) -> tuple[dict, dict]:
    sim = Sim({"generation": {"mode": "fixed_rate"}}, x=NEAR + FAR, seed=3)  # default radio: dual slope, fading
    if jam:  # 23 dBm, 10 m beside the near platoon's middle, from 1 s to 3 s
        jammed(sim, [jammer("jamming_constant", {"x_m": 22.0, "y_m": 10.0, "power_dbm": 23.0}, 1000, 3000)])
    sim.run(4000)
    return sim.trace(), sim.ch.drain_load()


@pytest.fixture(scope="module")
def platoons() -> tuple[tuple[dict, dict], tuple[dict, dict]]:
    return _platoons(False), _platoons(True)


def _delivery(tr: dict, members: range, lo_ms: int, hi_ms: int) -> float:
    """CAMs the platoon's members received from each other in [lo, hi) per CAM they generated then and per
    receiver (1: every CAM reached every other member in time)."""
    sender, receiver = np.isin(tr["sender"], members), np.isin(tr["receiver"], members)
    generated = (tr["event"] == "tx") & sender & (tr["generated_ns"] >= lo_ms * MS) & (tr["generated_ns"] < hi_ms * MS)
    received = (tr["event"] == "rx") & (tr["outcome"] == "received") & sender & receiver & \
        (tr["t_ns"] >= lo_ms * MS) & (tr["t_ns"] < hi_ms * MS)
    return int(received.sum()) / (int(generated.sum()) * (len(members) - 1))


def test_a_jammer_cuts_the_links_it_reaches_and_leaves_far_ones_alone(platoons: tuple) -> None:
    (honest, _), (attacked, _) = platoons
    near, far = range(0, 4), range(4, 8)
    assert _delivery(honest, near, 1000, 3000) > 0.9  # 15-45 m on the measured highway model
    assert _delivery(attacked, near, 1000, 3000) == 0.0
    # back once it stops: what is sent arrives (reactive DCC, closed by the busy channel, lets fewer CAMs through
    # for a while: it steps back one state per second of lower load, TS 102 687)
    after = (attacked["t_ns"] >= 3000 * MS) & np.isin(attacked["sender"], near)
    sent = int((after & (attacked["outcome"] == "sent")).sum())
    received = int((after & (attacked["outcome"] == "received") & np.isin(attacked["receiver"], near)).sum())
    assert sent >= 4 * 5 and received / (3 * sent) > 0.9
    # the jammer's mean power at 3 km is -98 dBm below the -110 dBm cut-off: far links are the same frames, draws
    # and outcomes with and without it
    assert _delivery(attacked, far, 0, 4000) > 0.9
    pick = [np.isin(tr["sender"], far) & np.isin(tr["receiver"], [-1, *far]) for tr in (honest, attacked)]
    for column in ("t_ns", "event", "sender", "receiver", "generated_ns", "outcome", "rx_power_dbm"):
        np.testing.assert_array_equal(honest[column][pick[0]], attacked[column][pick[1]])


def test_a_jammer_above_the_carrier_sense_level_blocks_channel_access(platoons: tuple) -> None:
    """The jammer, 11-25 m from the near platoon, is about -37 dBm there, far above the -85 dBm carrier-sense
    level: their medium is busy all the time (CBR 1), no frame of theirs goes on air (the CAMs wait, are replaced
    or dropped by the DCC gatekeeper the busy channel closes), and they send again once it stops. The far
    platoon measures the same load as without it."""
    (_, honest_load), (tr, load) = platoons
    near = np.isin(tr["sender"], range(0, 4)) & (tr["event"] == "tx")
    sent = near & (tr["outcome"] == "sent")
    assert not (sent & (tr["t_ns"] >= 1000 * MS) & (tr["t_ns"] < 3000 * MS)).any()
    assert (near & (tr["generated_ns"] >= 1000 * MS) & (tr["generated_ns"] < 2900 * MS)).sum() >= 4 * 19
    assert (sent & (tr["t_ns"] >= 3000 * MS)).sum() >= 4 * 5
    jam_windows = np.isin(load["robot"], range(0, 4)) & (load["t_ns"] > 1000 * MS) & (load["t_ns"] <= 3000 * MS)
    assert jam_windows.sum() == 4 * 20 and (load["cbr"][jam_windows] == 1.0).all()
    far = [np.isin(lo["robot"], range(4, 8)) for lo in (honest_load, load)]
    np.testing.assert_array_equal(honest_load["cbr"][far[0]], load["cbr"][far[1]])


def test_frames_a_jammer_keeps_off_the_air_name_it(platoons: tuple) -> None:
    """Every CAM of the near platoon dropped before the air while the jammer holds its medium busy (replaced in
    the queue while it waited, or dropped by the gatekeeper of the DCC the busy channel closed) carries the
    jammer's label (1) in the trace's ``jammer`` column; the drops after it stopped (the DCC still closed, stepping
    back) and every other row carry 0; a run without jammers has no such column."""
    (honest, _), (tr, _) = platoons
    assert "jammer" not in honest
    dropped = (tr["event"] == "tx") & (tr["outcome"] == "dcc_dropped") & np.isin(tr["sender"], range(0, 4))
    during = (tr["t_ns"] >= 1000 * MS) & (tr["t_ns"] < 3000 * MS)
    assert (dropped & during).sum() >= 4 * 15  # 19 CAMs each generated while jammed, most never sent
    assert (tr["jammer"][dropped & during] == 1).all()
    assert (dropped & (tr["t_ns"] >= 3000 * MS)).sum() >= 1
    assert (tr["jammer"][~(dropped & during)] == 0).all()


# -- the SINR against a hand computation ------------------------------------------------------------------------------
def _free_space_dbm(p_dbm: float, d_m: float) -> float:
    return p_dbm - (47.86 + 20.0 * math.log10(d_m))  # free space at 5.9 GHz (docs/v2x.md, radio.py)


def test_the_jammer_power_enters_the_sinr_through_the_path_loss() -> None:
    """One sender at x = 0 (23 dBm), listening receivers along the road, a 0 dBm jammer at x = 400 m; free space,
    no shadowing, no fading: each link's signal and the jammer's power at its receiver follow from the distances.
    The model decodes a frame when SINR = S / (N + J) reaches the 6 dB capture threshold (its packet error rate is
    a step there: 0 above, 1 below), so each outcome is known: received, jammed (S / N alone would have passed), or
    below sensitivity (S < -85 dBm, jammer or not)."""
    xs = [0.0, 60.0, 120.0, 200.0, 260.0, 300.0, 330.0, 360.0, 380.0, 420.0, 700.0, 1200.0]
    rx = tuple(range(1, len(xs)))
    sim = jammed(Sim({"generation": SIMULTANEOUS, "radio": FREE_SPACE, **QUIET_MAC}, x=xs, listen_only=rx),
                 [jammer("jamming_constant", {"x_m": 400.0, "y_m": 0.0, "power_dbm": 0.0})])
    sim.run(1000)
    tr = sim.trace()
    noise_mw, capture = 10 ** (-98.0 / 10), 10 ** (6.0 / 10)
    assert _free_space_dbm(0.0, 400.0) < -85.0  # the sender does not sense the jammer: it sends every 100 ms
    seen = set()
    for r in rx:
        signal = _free_space_dbm(23.0, xs[r])
        jam = _free_space_dbm(0.0, abs(400.0 - xs[r]))
        sinr_db = signal - 10 * math.log10(noise_mw + 10 ** (jam / 10))
        assert abs(sinr_db - 6.0) > 0.5  # no receiver sits on the threshold
        if signal < -85.0:
            expected = "below_sensitivity"
        elif sinr_db >= 6.0:
            expected = "received"
        else:
            assert 10 ** (signal / 10) >= capture * noise_mw  # it would have passed without the jammer
            expected = "jammed"
        seen.add(expected)
        outcomes = rx_outcomes(tr, 0, r)
        assert len(outcomes) == 10 and set(outcomes) == {expected}, (xs[r], sinr_db, outcomes)
        sel = (tr["event"] == "rx") & (tr["receiver"] == r)
        np.testing.assert_allclose(tr["rx_power_dbm"][sel], signal, atol=1e-9)
    assert seen == {"received", "jammed", "below_sensitivity"}


def test_the_jammer_power_is_the_mean_path_loss_of_the_channel_model() -> None:
    """Dual slope: 20 log10 d below the 100 m breakpoint, 40 log10 beyond (the kernel's distance classes)."""
    tables = build_tables(RadioParams())
    d = np.array([0.5, 10.0, 99.0, 150.0, 1000.0])
    expected_db = np.where(d < 100.0, 47.86 + 20 * np.log10(np.maximum(d, 1.0)),
                           47.86 + 40.0 + 40 * np.log10(d / 100.0))
    np.testing.assert_allclose(-10 * np.log10(mean_gain(d**2, tables)), expected_db, atol=1e-9)


# -- a periodic jammer -------------------------------------------------------------------------------------------------
def test_a_periodic_jammer_of_duty_cycle_one_half_loses_the_frames_it_overlaps() -> None:
    """Sender at 0 (23 dBm, -74.4 dBm at the receiver 300 m away), a 0 dBm jammer 10 m beyond the receiver (-67.9
    dBm there: every frame it overlaps is lost; -97.7 dBm at the sender: never sensed, so the sender's timing is
    its own), on for 11.5 ms of every 23 ms. A frame of airtime A is lost when it starts within the on-time or A
    before it: P(loss) = (0.5 T + A) / T for a phase uniform over the period.

    The phases are close to uniform: CAMs every 100 ms step the phase by 100 mod 23 = 8 ms, and 8 and 23 are
    coprime, so every 23 consecutive frames have phases 1 ms apart covering the period; the share of such phases
    in a window is its length over 23 ms within 1/23 (0.043), and the random processing delay (1-3 ms) and backoff
    only smooth that. So the measured share of 300 frames is within 0.05 of P(loss)."""
    period_ms = 23.0
    sim = jammed(Sim({"generation": {"mode": "fixed_rate"}, "radio": FREE_SPACE, "dcc": {"mode": "off"}},
                     x=[0.0, 300.0], listen_only=(1,)),
                 [jammer("jamming_periodic", {"x_m": 310.0, "y_m": 0.0, "power_dbm": 0.0, "period_s": 0.023,
                                              "duty_cycle": 0.5})])
    sim.run(30_200)
    tr = sim.trace()
    outcomes = np.array(rx_outcomes(tr, 0, 1))
    assert len(outcomes) >= 300 and set(outcomes) <= {"received", "jammed"}
    lf = sim.ch.airtime_ns[True] / MS  # every fifth CAM carries the low-frequency container (500 ms at 10 Hz)
    airtime_ms = 0.8 * sim.ch.airtime_ns[False] / MS + 0.2 * lf
    expected = (0.5 * period_ms + airtime_ms) / period_ms
    assert abs(np.mean(outcomes == "jammed") - expected) < 0.05, (np.mean(outcomes == "jammed"), expected)


# -- a reactive jammer -------------------------------------------------------------------------------------------------
def test_a_reactive_jammer_jams_its_target_only() -> None:
    """Two senders side by side (they sense each other, so their frames do not overlap), a listener 300 m away and
    a 0 dBm jammer 10 m beyond it that reacts to station 0's frames from 1 s to 3 s: station 0's frames are jammed
    at the listener then, and only then; station 1's never."""
    sim = jammed(Sim({"generation": {"mode": "fixed_rate"}, "radio": FREE_SPACE, **QUIET_MAC},
                     x=[0.0, 5.0, 300.0], listen_only=(2,)),
                 [jammer("jamming_reactive", {"x_m": 310.0, "y_m": 0.0, "power_dbm": 0.0, "target": "s0"},
                         1000, 3000)])
    sim.run(4000)
    tr = sim.trace()
    rx = (tr["event"] == "rx") & (tr["receiver"] == 2)
    window = (tr["generated_ns"] >= 1000 * MS) & (tr["generated_ns"] < 2990 * MS)
    target = rx & (tr["sender"] == 0)
    assert (target & window).sum() >= 19 and set(tr["outcome"][target & window]) == {"jammed"}
    outside = target & ((tr["generated_ns"] < 990 * MS) | (tr["generated_ns"] >= 3000 * MS))
    assert outside.sum() >= 19 and set(tr["outcome"][outside]) == {"received"}
    other = rx & (tr["sender"] == 1)
    assert other.sum() >= 39 and set(tr["outcome"][other]) == {"received"}
