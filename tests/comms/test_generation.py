"""CAM generation rules (EN 302 637-2, 6.1.3): each trigger, N_GenCam, the DCC limit, the LF container."""

from __future__ import annotations

import math

import numpy as np
import pytest

from comms_models.itsg5.generation import CamGeneration
from comms_models.itsg5.params import GenerationParams

MS = 1_000_000


def run(gen: CamGeneration, duration_ms: int, state, t_dcc_ms: float | np.ndarray = 100.0, step_ms: int = 10):
    """Step one or more stations on a ``step_ms`` grid; ``state(t_s) -> (x, y, yaw, v)`` arrays.
    Returns the list of (t_ms, row, with_lf, condition) of every CAM."""
    cams = []
    for t_ms in range(0, duration_ms + 1, step_ms):
        x, y, yaw, v = (np.atleast_1d(np.asarray(c, np.float64)) for c in state(t_ms / 1000.0))
        dcc = np.broadcast_to(np.round(np.asarray(t_dcc_ms) * MS).astype(np.int64), x.shape)
        send, lf = gen.check(t_ms * MS, x, y, yaw, v, np.ascontiguousarray(dcc))
        for row in np.flatnonzero(send):
            cams.append((t_ms, int(row), bool(lf[row]), int(gen.last_condition[row])))
    return cams


def make(n: int = 1, **kw) -> CamGeneration:
    gen = CamGeneration(GenerationParams(**kw))
    gen.spawn(np.zeros(n, np.int64))
    return gen


def times(cams, row: int = 0) -> list[int]:
    return [t for t, r, _, _ in cams if r == row]


def test_standstill_sends_every_t_gen_cam_max_by_condition_2():
    cams = run(make(), 3500, lambda t: (0.0, 0.0, 0.0, 0.0))
    assert times(cams) == [0, 1000, 2000, 3000]
    assert [c for _, _, _, c in cams] == [3, 2, 2, 2]  # first CAM, then time-triggered


def test_position_trigger_after_more_than_4_m():
    # 19.5 m/s: more than 4 m after 205 ms, so every 210 ms on a 10 ms grid.
    cams = run(make(), 1000, lambda t: (19.5 * t, 0.0, 0.0, 19.5))
    assert times(cams) == [0, 210, 420, 630, 840]
    assert all(c == 1 for _, _, _, c in cams[1:])


def test_speed_trigger_against_last_sent_cam():
    # Speed creeps up by 0.2 m/s per 100 ms: compared with the last *sent* CAM it passes 0.5 m/s after 300 ms.
    cams = run(make(), 1000, lambda t: (0.0, 0.0, 0.0, 2.0 * math.floor(t * 10 + 1e-9) / 10))
    assert times(cams)[:3] == [0, 300, 600]
    assert cams[1][3] == 1


@pytest.mark.parametrize(("start_deg", "end_deg", "triggers"), [
    (179.0, -178.0, False),  # 3 deg across the +-180 seam
    (179.0, -176.5, True),  # 4.5 deg across the seam
    (10.0, 13.9, False),  # below the threshold
    (10.0, 14.1, True),  # just above it
    (358.0, 2.5, True),  # 4.5 deg across 0
])
def test_heading_trigger_modulo_360(start_deg, end_deg, triggers):
    def state(t):
        return 0.0, 0.0, math.radians(start_deg if t < 0.3 else end_deg), 0.0

    cams = run(make(), 900, state)
    assert (300 in times(cams)) is triggers


def test_n_gen_cam_counts_consecutive_condition_2_only():
    # One dynamics-triggered CAM after 300 ms sets T_GenCam = 300 ms; the vehicle then stops. Three
    # time-triggered CAMs follow at that interval, after which T_GenCam = T_GenCamMax.
    def state(t):
        return (5.0 if t >= 0.3 else 0.0), 0.0, 0.0, 0.0

    cams = run(make(), 3500, state)
    assert times(cams) == [0, 300, 600, 900, 1200, 2200, 3200]
    assert [c for _, _, _, c in cams] == [3, 1, 2, 2, 2, 2, 2]


def test_condition_1_restarts_the_count():
    # T_GenCam = 300 ms; two condition-2 CAMs, then a jump (condition 1 at 900 ms, T_GenCam = 300 ms again),
    # so three more condition-2 CAMs at 300 ms follow before the interval grows.
    def state(t):
        return (5.0 if t >= 0.3 else 0.0) + (5.0 if t >= 0.9 else 0.0), 0.0, 0.0, 0.0

    cams = run(make(), 3000, state)
    assert times(cams) == [0, 300, 600, 900, 1200, 1500, 1800, 2800]
    assert [c for _, _, _, c in cams] == [3, 1, 2, 1, 2, 2, 2, 2]


@pytest.mark.parametrize(("t_dcc_ms", "interval_ms"), [(500.0, 500), (50.0, 210), (2000.0, 1000)])
def test_dcc_limit_clamped_to_min_max(t_dcc_ms, interval_ms):
    # 19.5 m/s would trigger every 210 ms; DCC allows one CAM per T_GenCam_DCC, clamped to [100 ms, 1 s].
    cams = run(make(), 3000, lambda t: (19.5 * t, 0.0, 0.0, 19.5), t_dcc_ms=t_dcc_ms)
    assert np.all(np.diff(times(cams)) == interval_ms)


def test_low_frequency_container_first_and_every_500_ms():
    cams = run(make(), 2000, lambda t: (19.5 * t, 0.0, 0.0, 19.5))
    lf_times = [t for t, _, lf, _ in cams if lf]
    assert lf_times == [0, 630, 1260, 1890]
    assert np.all(np.diff(lf_times) >= 500)


def test_fixed_rate_mode():
    cams = run(make(mode="fixed_rate", fixed_rate_hz=10.0), 1000, lambda t: (19.5 * t, 0.0, 0.0, 19.5),
               t_dcc_ms=1000.0)
    assert times(cams) == list(range(0, 1001, 100))
    assert [t for t, _, lf, _ in cams if lf] == [0, 500, 1000]


def test_check_interval():
    # T_CheckCamGen = 100 ms: a trigger is only seen on that grid (4 m passed after 205 ms -> sent at 300 ms).
    cams = run(make(t_check_s=0.1), 700, lambda t: (19.5 * t, 0.0, 0.0, 19.5))
    assert times(cams) == [0, 300, 600]


def test_stations_are_independent_and_rows_follow_spawn_despawn():
    gen = make(2)
    gen.spawn(np.asarray([500 * MS]))  # a third station starts later

    def state(t):
        return np.array([19.5 * t, 0.0, 0.0]), np.zeros(3), np.zeros(3), np.array([19.5, 0.0, 0.0])

    cams = run(gen, 1000, state)
    assert times(cams, 0) == [0, 210, 420, 630, 840]
    assert times(cams, 1) == [0, 1000]
    assert times(cams, 2) == [500]
    gen.despawn(np.array([True, False, True]))
    assert len(gen) == 2
    cams = run(gen, 0, lambda t: (np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2)))
    assert len(gen.t_last) == 2
