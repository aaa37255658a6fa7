"""The CA basic service's CAM generation rules (ETSI EN 302 637-2, 6.1.3), vectorised over stations.

At every check tick a station compares its current dynamics with those of the last CAM it *sent* and with the
time elapsed since then (``T_GenCam_DCC`` is the interval congestion control allows, clamped to
[T_GenCamMin, T_GenCamMax]):

1. Condition 1 (dynamics): ``elapsed >= T_GenCam_DCC`` and heading changed by more than 4 deg (modulo 360),
   position by more than 4 m or speed by more than 0.5 m/s -> send; ``T_GenCam = min(elapsed, T_GenCamMax)``;
   the count of consecutive condition-2 CAMs restarts.
2. Condition 2 (time): otherwise ``elapsed >= T_GenCam`` and ``elapsed >= T_GenCam_DCC`` -> send and count it;
   after N_GenCam consecutive condition-2 CAMs ``T_GenCam = T_GenCamMax``.

The first CAM of a station is sent at its first check (with ``T_GenCam = T_GenCamMax``). A CAM carries the
low-frequency container when it is the first one or when at least 500 ms passed since the last container.

``fixed_rate`` mode ignores the rules and sends every 1/rate on the check grid (low-frequency container as above).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .params import GenerationParams

_NS = 1_000_000_000


@njit(cache=True)
def _check_etsi(
    t_ns: np.int64, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray, t_dcc_ns: np.ndarray,
    next_check: np.ndarray, t_last: np.ndarray, last_x: np.ndarray, last_y: np.ndarray, last_yaw: np.ndarray,
    last_v: np.ndarray, t_gen_cam: np.ndarray, n_cond2: np.ndarray, t_last_lf: np.ndarray,
    check_ns: np.int64, min_ns: np.int64, max_ns: np.int64, n_gen_cam: np.int64, lf_ns: np.int64,
    heading_rad: float, position_m2: float, speed_mps: float, send: np.ndarray, with_lf: np.ndarray,
    cond: np.ndarray,
) -> None:
    # One pass per station: the rules are branches, which a fused loop states directly (and cheaply).
    for i in range(x.shape[0]):
        send[i] = False
        with_lf[i] = False
        cond[i] = 0
        if t_ns < next_check[i]:
            continue
        next_check[i] = t_ns + check_ns if check_ns > 0 else t_ns
        if t_last[i] < 0:
            # The first CAM, sent when the service starts; T_GenCam starts at T_GenCamMax.
            cond[i] = 3
            t_gen_cam[i] = max_ns
            n_cond2[i] = 0
        else:
            elapsed = t_ns - t_last[i]
            dcc = min(max(t_dcc_ns[i], min_ns), max_ns)
            # Heading compared modulo 360 deg: the difference wrapped into [-pi, pi).
            dyaw = (yaw[i] - last_yaw[i] + math.pi) % (2.0 * math.pi) - math.pi
            dx = x[i] - last_x[i]
            dy = y[i] - last_y[i]
            trigger = (
                abs(dyaw) > heading_rad
                or dx * dx + dy * dy > position_m2
                or abs(v[i] - last_v[i]) > speed_mps
            )
            if elapsed >= dcc and trigger:
                cond[i] = 1
                t_gen_cam[i] = min(elapsed, max_ns)
                n_cond2[i] = 0
            elif elapsed >= t_gen_cam[i] and elapsed >= dcc:
                cond[i] = 2
                n_cond2[i] += 1
                if n_cond2[i] >= n_gen_cam:
                    t_gen_cam[i] = max_ns
                    n_cond2[i] = n_gen_cam  # saturate: only "at least N" matters
            else:
                continue
        send[i] = True
        if t_last[i] < 0 or t_ns - t_last_lf[i] >= lf_ns:
            with_lf[i] = True
            t_last_lf[i] = t_ns
        t_last[i] = t_ns
        last_x[i] = x[i]
        last_y[i] = y[i]
        last_yaw[i] = yaw[i]
        last_v[i] = v[i]


@njit(cache=True)
def _check_fixed(
    t_ns: np.int64, next_check: np.ndarray, t_last: np.ndarray, t_next_cam: np.ndarray, t_last_lf: np.ndarray,
    check_ns: np.int64, period_ns: np.int64, lf_ns: np.int64, send: np.ndarray, with_lf: np.ndarray,
) -> None:
    for i in range(next_check.shape[0]):
        send[i] = False
        with_lf[i] = False
        if t_ns < next_check[i]:
            continue
        next_check[i] = t_ns + check_ns if check_ns > 0 else t_ns
        first = t_last[i] < 0
        if not first and t_ns < t_next_cam[i]:
            continue
        # Keep the nominal schedule (no drift on a coarse check grid) unless more than a period behind.
        t_next_cam[i] = t_ns + period_ns if first or t_ns - t_next_cam[i] >= period_ns else t_next_cam[i] + period_ns
        send[i] = True
        if first or t_ns - t_last_lf[i] >= lf_ns:
            with_lf[i] = True
            t_last_lf[i] = t_ns
        t_last[i] = t_ns


class CamGeneration:
    """Per-station generation state as arrays (rows in spawn order, deleted on despawn).

    ``check`` is called at every channel step; a station is evaluated when its check tick is due (every
    ``t_check_s``, or every call when that is None).
    """

    _INT_FIELDS = ("next_check", "t_last", "t_gen_cam", "n_cond2", "t_last_lf", "t_next_cam")
    _FLOAT_FIELDS = ("last_x", "last_y", "last_yaw", "last_v")

    def __init__(self, params: GenerationParams) -> None:
        self.params = params
        self.check_ns = 0 if params.t_check_s is None else round(params.t_check_s * _NS)
        self.min_ns = round(params.t_gen_cam_min_s * _NS)
        self.max_ns = round(params.t_gen_cam_max_s * _NS)
        self.lf_ns = round(params.lf_interval_s * _NS)
        self.period_ns = round(_NS / params.fixed_rate_hz)
        for name in self._INT_FIELDS:
            setattr(self, name, np.empty(0, np.int64))
        for name in self._FLOAT_FIELDS:
            setattr(self, name, np.empty(0, np.float64))
        self.last_condition = np.empty(0, np.int8)
        """Why each station sent at the last check: 0 none, 1 dynamics, 2 time, 3 first CAM (etsi mode)."""

    def __len__(self) -> int:
        return len(self.t_last)

    def spawn(self, first_check_ns: np.ndarray) -> None:
        """Append stations whose service starts (first check, first CAM) at ``first_check_ns``."""
        first = np.asarray(first_check_ns, np.int64)
        n = len(first)
        grow = {
            "next_check": first, "t_last": np.full(n, -1, np.int64), "t_gen_cam": np.full(n, self.max_ns, np.int64),
            "n_cond2": np.zeros(n, np.int64), "t_last_lf": np.full(n, -1, np.int64),
            "t_next_cam": first.copy(),
        }
        for name, rows in grow.items():
            setattr(self, name, np.concatenate([getattr(self, name), rows]))
        for name in self._FLOAT_FIELDS:
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(n)]))
        self.last_condition = np.concatenate([self.last_condition, np.zeros(n, np.int8)])

    def despawn(self, keep: np.ndarray) -> None:
        """Keep only the rows where ``keep`` is True."""
        for name in (*self._INT_FIELDS, *self._FLOAT_FIELDS, "last_condition"):
            setattr(self, name, getattr(self, name)[keep])

    def check(
        self, t_ns: int, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray, t_gen_dcc_ns: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Evaluate the stations whose check is due at ``t_ns``: ``(send_mask, with_lf_mask)``.

        ``x, y`` (m), ``yaw`` (rad) and ``v`` (m/s) are the stations' current estimates; ``t_gen_dcc_ns`` the
        interval DCC currently allows each station (ignored in fixed_rate mode, where DCC acts on the frames).
        """
        n = len(self)
        send = np.empty(n, np.bool_)
        with_lf = np.empty(n, np.bool_)
        p = self.params
        if p.mode == "fixed_rate":
            _check_fixed(
                np.int64(t_ns), self.next_check, self.t_last, self.t_next_cam, self.t_last_lf,
                np.int64(self.check_ns), np.int64(self.period_ns), np.int64(self.lf_ns), send, with_lf,
            )
            self.last_condition = send.astype(np.int8) * np.int8(2)
            return send, with_lf
        _check_etsi(
            np.int64(t_ns), np.asarray(x, np.float64), np.asarray(y, np.float64), np.asarray(yaw, np.float64),
            np.asarray(v, np.float64), np.asarray(t_gen_dcc_ns, np.int64), self.next_check, self.t_last,
            self.last_x, self.last_y, self.last_yaw, self.last_v, self.t_gen_cam, self.n_cond2, self.t_last_lf,
            np.int64(self.check_ns), np.int64(self.min_ns), np.int64(self.max_ns), np.int64(p.n_gen_cam),
            np.int64(self.lf_ns), math.radians(p.heading_threshold_deg), p.position_threshold_m**2,
            p.speed_threshold_mps, send, with_lf, self.last_condition,
        )
        return send, with_lf
