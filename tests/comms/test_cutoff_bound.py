"""The cut-off radius of the ITS-G5 medium changes results only within its stated bound (``radio.cutoff_bound``):
closed forms at the radius, and a run of 300 stations along 6 km with the default cut-off against one whose radius
holds every station."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from comms_models.base import Interest, with_names
from comms_models.itsg5.model import ItsG5Channel
from comms_models.itsg5.params import RadioParams
from comms_models.itsg5.radio import cutoff_bound, cutoff_power_for, cutoff_radius_m, reception_probability
from core.robots import RobotSpec

MS = 1_000_000
P_BOUND = 2.1e-3
"""The default cut-off's bound (docs/v2x.md): a frame from the radius reaches the sensitivity or the carrier-sense
level with a probability below this."""


def test_closed_form_probability_at_the_radius_is_below_the_bound() -> None:
    params = RadioParams()
    b = cutoff_bound(params)
    assert b.radius_m == pytest.approx(1344.3, abs=0.1)
    assert b.p_decode < P_BOUND and b.p_sense < P_BOUND
    # the probability falls beyond the radius, so every link the cut-off drops is bounded by it
    far = reception_probability(np.linspace(b.radius_m, 5 * b.radius_m, 50), params)
    assert np.all(np.diff(far) <= 0) and far[0] == pytest.approx(b.p_decode)
    assert b.frame_mean_dbm == pytest.approx(-110.0 + 10 * math.log10(math.exp((8.1 * math.log(10) / 10) ** 2 / 2)))
    # the mean interference beyond the radius: 2 rho E[S] P(R) R / 3 on a d^-4 road
    assert b.far_noise_rise_db(0.0, -98.0) == 0.0
    # the run below: 300 stations / 6 km, each 10 CAMs/s of 208 us on air; a saturated road: CBR 1 over +-318 m
    assert 0.1 < b.far_noise_rise_db(300 / 6000 * 10 * 208e-6, -98.0) < 0.2
    assert 1.5 < b.far_noise_rise_db(1 / 636, -98.0) < 2.0


def test_cutoff_power_for_a_bound_inverts_the_closed_form() -> None:
    params = RadioParams()
    power = cutoff_power_for(params, 1e-4)
    assert -118.5 < power < -117.5
    strict = params.model_copy(update={"cutoff_power_dbm": power})
    assert cutoff_bound(strict).p_decode <= 1e-4
    looser = params.model_copy(update={"cutoff_power_dbm": power + 0.1})
    assert cutoff_bound(looser).p_decode > 1e-4
    assert cutoff_radius_m(strict) > cutoff_radius_m(params)
    assert cutoff_power_for(params, P_BOUND) >= params.cutoff_power_dbm  # the default meets its own bound
    with pytest.raises(ValueError):
        cutoff_power_for(params, 1e-30)


def _run(cutoff_dbm: float, n: int = 300, spacing_m: float = 20.0, duration_ms: int = 2000) -> tuple[dict, dict]:
    """Every link's outcome (sender, receiver, generation time) -> outcome, and the stations' positions."""
    ch = ItsG5Channel({"pcap": False, "codec_sample_rate": 0.0, "trace": "all",
                       "generation": {"mode": "fixed_rate"}, "radio": {"cutoff_power_dbm": cutoff_dbm}}, seed=3)
    ids = np.arange(n)
    ch.spawn([RobotSpec(id=int(i), name=f"s{i}", spawn_ns=0) for i in ids])
    x = ids * spacing_m
    zeros = np.zeros(n)
    none = Interest(np.empty(0, np.int64), np.empty(0, np.int64))
    links: dict[tuple[int, int, int], str] = {}
    for k in range(duration_ms // 10):
        ch.step(k * 10 * MS, {"id": ids, "x": x, "y": zeros, "yaw": zeros, "v": zeros, "a": zeros,
                              "yaw_rate": zeros}, none)
        rec = with_names(ch.drain_records())
        rx = rec["event"] == "rx"
        keys = zip(rec["sender"][rx].tolist(), rec["receiver"][rx].tolist(), rec["generated_ns"][rx].tolist(),
                   strict=True)
        links.update(zip(keys, rec["outcome"][rx].tolist(), strict=True))
    return links, {int(i): float(v) for i, v in zip(ids, x, strict=True)}


@pytest.mark.slow  # two 6 km runs of the full channel: about a minute and a half
def test_a_run_changes_only_within_the_bound() -> None:
    """Tolerance: every per-distance PDR (250 m bins) and every receiver's share of changed outcomes within the
    radius differs by at most ``P_BOUND`` plus three binomial standard deviations of the bin (or receiver) size."""
    radius = cutoff_radius_m(RadioParams())
    cut, x = _run(-110.0)
    full, _ = _run(-150.0)  # radius 13 km: every station of the 6 km road is linked
    assert cutoff_radius_m(RadioParams(cutoff_power_dbm=-150.0)) > 6000.0
    dist = {k: abs(x[k[0]] - x[k[1]]) for k in full}
    # within the radius the cut run has every link of the full run; beyond it none
    assert all(k in cut for k in full if dist[k] < radius - 1.0)
    assert not any(dist[k] > radius + 1.0 for k in cut)
    bins = np.arange(0.0, 6250.0, 250.0)
    checked_beyond = 0
    for lo, hi in itertools.pairwise(bins):
        keys = [k for k in full if lo <= dist[k] < hi]
        n = len(keys)
        pdr_full = sum(full[k] == "received" for k in keys) / n
        pdr_cut = sum(cut.get(k) == "received" for k in keys) / n
        tol = P_BOUND + 3.0 * math.sqrt(P_BOUND * (1 - P_BOUND) / n)
        assert abs(pdr_cut - pdr_full) <= tol, (lo, pdr_cut, pdr_full)
        if lo >= radius:
            assert pdr_cut == 0.0 and pdr_full <= tol
            checked_beyond += 1
    assert checked_beyond >= 15
    changed: dict[int, list[int]] = {}
    for k, outcome in full.items():
        if dist[k] < radius - 1.0:
            c = changed.setdefault(k[1], [0, 0])
            c[0] += cut[k] != outcome
            c[1] += 1
    for receiver, (k, n) in changed.items():
        assert k / n <= P_BOUND + 3.0 * math.sqrt(P_BOUND * (1 - P_BOUND) / n), receiver
    assert sum(k for k, _ in changed.values()) > 0  # the far frames do matter, a little (the test sees it)
