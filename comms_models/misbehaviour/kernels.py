"""The plausibility detector's per-message work as compiled loops: every check of ``checks`` on each delivery of a
step, one pass over the messages instead of some hundred array operations per step (a step of 1,000 stations
delivers a few hundred messages, where the cost of an array operation is its call, not its elements). The checks
are the functions of ``checks``, compiled as they are; the loops only find each message's inputs."""

from __future__ import annotations

import numpy as np
from numba import njit

from core.kernel_cache import depends_on

from . import checks as ck

_acceptance_range = njit(cache=True)(ck.acceptance_range)
_speed = njit(cache=True)(ck.speed)
_position_consistency = njit(cache=True)(ck.position_consistency)
_speed_consistency = njit(cache=True)(ck.speed_consistency)
_position_speed = njit(cache=True)(ck.position_speed)
_beacon_frequency = njit(cache=True)(ck.beacon_frequency)
_sudden_appearance = njit(cache=True)(ck.sudden_appearance)
_sensor_overlap = njit(cache=True)(ck.sensor_overlap)
_desired_accel = njit(cache=True)(ck.desired_accel)
_freshness = njit(cache=True)(ck.freshness)
_leader_claim = njit(cache=True)(ck.leader_claim)
_leader_moved = njit(cache=True)(ck.leader_moved)
_maneuver_entitlement = njit(cache=True)(ck.maneuver_entitlement)

(B_RANGE, B_SPEED, B_POS, B_SPD, B_POS_SPEED, B_BEACON, B_SUDDEN, B_SENSOR, B_DESIRED, B_KALMAN, B_FRESH, B_LEADER,
 B_MANEUVER) = (ck.bit(name) for name in ck.CHECKS)
# thresholds, in the order the kernels take them (``PlausibilityDetector.thresholds``)
(P_MAX_RANGE, P_MAX_SPEED, P_MAX_REVERSE, P_MAX_ACCEL, P_POS_TOL, P_SPEED_TOL, P_PS_TOL_M, P_PS_TOL_MPS, P_MIN_GAP,
 P_WARMUP, P_APPEAR, P_SENSOR_TOL, P_ACCEL_TOL, P_MAX_AGE, P_MAX_FUTURE, P_LEADER_TOL, P_TRACK_AGE, P_MAX_JERK,
 P_MAX_GAP) = range(19)
N_THRESHOLDS = 19


@njit(cache=True)
def _ids(value: float) -> int:  # pragma: no cover - compiled
    """A station id held as float64 (NaN: unknown, -1)."""
    return int(value) if np.isfinite(value) else -1


@njit(cache=True)
def per_message(t_ns, kind, has_kind, x, y, yaw, v, a, u_des, gen, o_rows, own_x, own_y, own_yaw, measured, front,
                rear, p, distance, mask):  # pragma: no cover - compiled
    """The checks of one message alone: acceptance range, speed and sensor overlap (``measured``: the receiver's
    range to the sender, NaN when its sensor does not track it; ``front``, ``rear``: the receiver's and the
    sender's bumpers); ``distance`` gets the claimed position's distance from the receiver."""
    for i in range(len(x)):
        o = o_rows[i]
        ox = own_x[o] if o >= 0 else np.nan
        oy = own_y[o] if o >= 0 else np.nan
        d = np.hypot(x[i] - ox, y[i] - oy)
        distance[i] = d
        bits = 0
        if kind[i] == 0:
            if _acceptance_range(d, p[P_MAX_RANGE]):
                bits |= B_RANGE
            if _speed(v[i], p[P_MAX_SPEED], p[P_MAX_REVERSE]):
                bits |= B_SPEED
            if not np.isnan(measured[i]) and o >= 0:  # claimed range: front bumper to the claimed rear bumper
                sx, sy = ox + front[i] * np.cos(own_yaw[o]), oy + front[i] * np.sin(own_yaw[o])
                tx, ty = x[i] - rear[i] * np.cos(yaw[i]), y[i] - rear[i] * np.sin(yaw[i])
                age_s = (t_ns - gen[i]) / 1e9
                tol = p[P_SENSOR_TOL] + np.abs(v[i]) * (max(age_s, 0.0) + 0.1)
                if _sensor_overlap(np.hypot(tx - sx, ty - sy), measured[i], tol):
                    bits |= B_SENSOR
        mask[i] = bits


@njit(cache=True)
def desired(rows, keys, received, u_des, a, h_keys, h_gen, p, mask):  # pragma: no cover - compiled
    """``desired_accel`` of the messages ``rows`` that carry a desired acceleration, against the acceleration of
    the sender's newest CAM the receiver holds (``h_*``, sorted by pair key; none held: no verdict on the
    difference), measured that long before the message was received (a PM row's ``generated_ns`` is its
    kinematics' CAM's, a few ns on)."""
    for i in rows:
        at = np.searchsorted(h_keys, keys[i])
        age = np.nan
        if at < len(h_keys) and h_keys[at] == keys[i]:
            age = (received[i] - h_gen[at]) / 1e9
        if _desired_accel(u_des[i], a[i], age, p[P_MAX_ACCEL], p[P_ACCEL_TOL], p[P_MAX_JERK]):
            mask[i] |= B_DESIRED


@njit(cache=True)
def against_history(order, keys, gen, received, x, y, yaw, v, distance, listening, h_keys, h_gen, h_x, h_y, h_yaw,
                    h_v, p, mask, new):  # pragma: no cover - compiled
    """The checks that compare a CAM with the previous one of its pair: ``order`` the CAM rows sorted by pair key,
    then generation time; the previous CAM is the one before it in the step, or the newest one held (``h_*``,
    sorted by key). The newest CAM of each pair updates what is held (in place; ``new``: rows of pairs not held
    yet, for the caller to add)."""
    n = len(order)
    for j in range(n):
        r = order[j]
        k = keys[r]
        within = j > 0 and keys[order[j - 1]] == k
        found = False
        at = 0
        if within:
            q = order[j - 1]
            p_gen, p_x, p_y, p_v = gen[q], x[q], y[q], v[q]
        else:
            at = np.searchsorted(h_keys, k)
            found = at < len(h_keys) and h_keys[at] == k
            if found:
                p_gen, p_x, p_y, p_v = h_gen[at], h_x[at], h_y[at], h_v[at]
            else:
                p_gen, p_x, p_y, p_v = gen[r], x[r], y[r], v[r]
        has_prev = within or found
        dt = (gen[r] - p_gen) / 1e9 if has_prev else np.nan
        moved = np.hypot(x[r] - p_x, y[r] - p_y)
        bits = 0
        # consecutive CAMs only: over a longer silence (a pair the applications did not read for a while) the
        # trapezoid of two speeds is no estimate of the distance moved (its error grows as a_max dt^2 / 4), and the
        # Kalman track of the pair restarts after the same gap (``kalman.KalmanParams.max_gap_s``)
        if has_prev and dt > 0 and dt <= p[P_MAX_GAP]:
            if _position_consistency(moved, p_v, v[r], dt, p[P_MAX_ACCEL], p[P_POS_TOL]):
                bits |= B_POS
            if _speed_consistency(p_v, v[r], dt, p[P_MAX_ACCEL], p[P_SPEED_TOL]):
                bits |= B_SPD
            if _position_speed(moved, p_v, v[r], dt, p[P_PS_TOL_M], p[P_PS_TOL_MPS]):
                bits |= B_POS_SPEED
        if has_prev and _beacon_frequency(dt, p[P_MIN_GAP]):
            bits |= B_BEACON
        if _freshness((received[r] - gen[r]) / 1e9, has_prev and dt < 0, p[P_MAX_AGE], p[P_MAX_FUTURE]):
            bits |= B_FRESH
        if _sudden_appearance(not has_prev, listening[r], distance[r], p[P_WARMUP], p[P_APPEAR]):
            bits |= B_SUDDEN
        mask[r] |= bits
        if j == n - 1 or keys[order[j + 1]] != k:  # the pair's newest CAM of the step is held from now on
            at = np.searchsorted(h_keys, k)
            if at < len(h_keys) and h_keys[at] == k:
                h_gen[at], h_x[at], h_y[at], h_yaw[at], h_v[at] = gen[r], x[r], y[r], yaw[r], v[r]
            else:
                new[r] = True


@njit(cache=True)
def platoon_roles(rows, receiver, sender, received, index, pid, state, peer, gn_x, gn_y, o_rows, own_pred,
                  own_leader, own_pid, own_index, h_keys, h_gen, h_x, h_y, h_yaw, h_v, p, mask):  # pragma: no cover
    """``leader_consistency`` and ``maneuver_entitlement`` of the platooning messages ``rows``, against the roles of
    their receivers (``own_*`` at ``o_rows``: NaN unknown; a station at index 0 leads) and the leader's newest CAM
    held (``h_*``)."""
    for i in rows:
        o = o_rows[i]
        me = receiver[i]
        pred = _ids(own_pred[o]) if o >= 0 else -1
        leader = _ids(own_leader[o]) if o >= 0 else -1
        mine = own_pid[o] if o >= 0 else np.nan
        if o >= 0 and own_index[o] == 0:
            leader = me
        s = sender[i]
        same = not (np.isfinite(pid[i]) and np.isfinite(mine)) or pid[i] == mine
        bits = 0
        failed = _leader_claim(index[i], s, leader, same)
        if not failed and s == leader and leader != me and np.isfinite(gn_x[i]):
            k = (np.int64(me) << 32) | (np.int64(s) & 0xFFFFFFFF)
            at = np.searchsorted(h_keys, k)
            if at < len(h_keys) and h_keys[at] == k:
                age = max((received[i] - h_gen[at]) / 1e9, 0.0)
                ahead = h_v[at] * age
                dist = np.hypot(gn_x[i] - (h_x[at] + ahead * np.cos(h_yaw[at])),
                                gn_y[i] - (h_y[at] + ahead * np.sin(h_yaw[at])))
                failed = age <= p[P_TRACK_AGE] and _leader_moved(dist, age, p[P_MAX_ACCEL], p[P_LEADER_TOL])
        if failed:
            bits |= B_LEADER
        member = s in (pred, leader)
        place = own_index[o] if o >= 0 else np.nan
        elsewhere = np.isfinite(mine) and not (np.isfinite(pid[i]) and pid[i] == mine)
        if _maneuver_entitlement(state[i], index[i], s, _ids(peer[i]), member, leader, pred, place, elsewhere):
            bits |= B_MANEUVER
        mask[i] |= bits


# the kernels compile the checks of ``checks`` into their code: an edit of checks.py must compile them again
depends_on(globals(), ck)
