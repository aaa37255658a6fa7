"""The jammers on the ITS-G5 medium (the attacks ``jamming_*``, ``comms_models.attacks.jamming``): their schedule
as the access kernel's ``J*`` rows, and their power at every station for the step's positions.

A jammer's power at a station is its transmit power through the mean path loss of the channel's propagation model
(``radio.path_loss_db``, the same distance classes the kernel draws frames with), without shadowing or fading: its
signal lasts much longer than the channel's coherence time, so the fast fading averages out over a frame, and a
deterministic power lets a study (and a test) compute the SINR by hand. Below the channel's cut-off power a
jammer, like a frame, is not heard at all. The access kernel (``access``) switches jammers on and off (by their
schedule, or with their target's frames) through ``jam_set`` and ``jam_next`` here, which add their power to the
interference and the carrier sense of every station; ``jam_refresh`` moves it with this step's positions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from core import rng
from core.kernel_cache import depends_on
from core.robots import rows_of

from ..attacks.jamming import JAM_MODES, JammerSpec
from . import access_layout as ax
from . import links
from .access_layout import (
    F_CUM_POWER,
    F_CUR_POWER,
    F_JAM_CUM,
    F_JAM_CUR,
    INF_NS,
    J_FROM,
    J_MODE,
    J_ON,
    J_ON_NS,
    J_PERIOD,
    J_TO,
    JAM_CONSTANT,
    JAM_REACTIVE,
    S_NLINKS,
)
from .links import sense_end, sense_start
from .params import RadioParams
from .radio import PropagationTables, dbm_to_mw

MAX_JAMMERS = 63  # a frame marks the reactive jammers it holds in one int64 (access_layout.T_REACT)


def mean_gain(d2: np.ndarray, tables: PropagationTables) -> np.ndarray:
    """1 / mean path loss (linear) at squared distances ``d2`` [m^2]: the kernel's distance classes and laws
    (``tx_mw / (coef d^2)`` or ``/ (coef d^4)``) without the shadowing and fading factor."""
    d2 = np.maximum(np.asarray(d2, np.float64), tables.min_d2)
    c = np.minimum(np.searchsorted(tables.class_limit_m2, d2, side="right"), len(tables.class_coef) - 1)
    law = np.where(tables.class_exp4[c] == 1, d2 * d2, d2)
    return 1.0 / (tables.class_coef[c] * law)


class Jammers:
    """The run's jammers: ``i`` their kernel rows (``access_layout.J*``), ``p`` their power [mW] at each station row (as
    of the last step), ``s`` whether each station counts them in its carrier sense."""

    def __init__(self, specs: Sequence[JammerSpec], radio: RadioParams, tables: PropagationTables) -> None:
        k = len(specs)
        if k > MAX_JAMMERS:
            raise ValueError(f"itsg5: {k} jammers, at most {MAX_JAMMERS}")
        self.tables = tables
        self.cutoff_mw = float(dbm_to_mw(radio.cutoff_power_dbm))
        self.i = np.zeros((k, ax.N_JI64), np.int64)
        for j, spec in enumerate(specs):
            row = self.i[j]
            row[ax.J_MODE] = JAM_MODES.index(spec.mode)
            row[ax.J_FROM], row[ax.J_TO] = spec.from_ns, spec.to_ns
            row[ax.J_PERIOD], row[ax.J_ON_NS], row[ax.J_TARGET] = spec.period_ns, spec.on_ns, spec.target
            row[ax.J_NEXT] = ax.INF_NS if spec.mode == "reactive" else spec.from_ns
        self.mw = np.array([float(dbm_to_mw(s.power_dbm)) for s in specs])
        self.fixed = np.array([s.x_m is not None for s in specs], bool)
        self.fixed_xy = np.array([(s.x_m or 0.0, s.y_m or 0.0) for s in specs], np.float64).reshape(k, 2)
        self.robot = np.array([s.robot for s in specs], np.int64)
        self.p = np.zeros((k, 0))
        self.s = np.zeros((k, 0), np.int64)

    def spawn(self, n: int) -> None:
        """``n`` stations appended (no jammer power counted at them yet: the next refresh adds it)."""
        k = len(self.mw)
        self.p = np.ascontiguousarray(np.hstack([self.p, np.zeros((k, n))]))
        self.s = np.ascontiguousarray(np.hstack([self.s, np.zeros((k, n), np.int64)]))

    def despawn(self, keep: np.ndarray) -> None:
        """Keep the station rows where ``keep`` is True."""
        self.p = np.ascontiguousarray(self.p[:, keep])
        self.s = np.ascontiguousarray(self.s[:, keep])

    def positions(self, ids: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each jammer's position: its fixed point, or its robot's (NaN when that robot is not on the channel)."""
        jx, jy = self.fixed_xy[:, 0].copy(), self.fixed_xy[:, 1].copy()
        riding = np.flatnonzero(~self.fixed)
        if len(riding):
            rows = rows_of(ids, self.robot[riding], missing=-1)
            ok = rows >= 0
            jx[riding] = np.where(ok, x[np.maximum(rows, 0)] if len(x) else np.nan, np.nan)
            jy[riding] = np.where(ok, y[np.maximum(rows, 0)] if len(y) else np.nan, np.nan)
        return jx, jy

    def powers(self, ids: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Each jammer's mean received power [mW] at each station (jammers x stations; 0 below the cut-off)."""
        jx, jy = self.positions(ids, x, y)
        d2 = (x[None, :] - jx[:, None]) ** 2 + (y[None, :] - jy[:, None]) ** 2
        present = np.isfinite(d2)
        p = self.mw[:, None] * mean_gain(np.where(present, d2, 0.0), self.tables)
        return np.ascontiguousarray(np.where(present & (p >= self.cutoff_mw), p, 0.0))


# -- in the access kernel: jammers switching and moving -----------------------------------------------------------
@njit(cache=True, error_model="numpy")
def jam_set(j: int, on: bool, t: np.int64, jam_i: np.ndarray, jam_p: np.ndarray, jam_s: np.ndarray, si: np.ndarray,
             sf: np.ndarray, cs_mw: float, cca_ns: np.int64, slot_ns: np.int64,
             aifs_ns: np.int64) -> None:  # pragma: no cover - compiled
    # Jammer j starts (stops) transmitting at t: its power at every station it reaches joins (leaves) the power on
    # air there, as interference of every frame it overlaps; where it is above the carrier-sense level the medium
    # is busy (backoffs freeze, the CBR counts it) as for a frame.
    jam_i[j, J_ON] = 1 if on else 0
    for r in range(jam_p.shape[1]):
        p = jam_p[j, r]
        if p <= 0.0:
            continue
        if on:
            sf[F_CUR_POWER, r] += p
            sf[F_CUM_POWER, r] += p
            sf[F_JAM_CUR, r] += p
            sf[F_JAM_CUM, r] += p
            if p >= cs_mw:
                sense_start(si, r, t, cca_ns, slot_ns)
                jam_s[j, r] = 1
        else:
            sf[F_JAM_CUR, r] = max(0.0, sf[F_JAM_CUR, r] - p)
            sf[F_CUR_POWER, r] = sf[F_JAM_CUR, r] if si[S_NLINKS, r] == 0 else sf[F_CUR_POWER, r] - p
            if jam_s[j, r] == 1:
                sense_end(si, sf, r, t, aifs_ns, slot_ns)
                jam_s[j, r] = 0


@njit(cache=True, inline="always")
def jam_next(jam_i: np.ndarray, j: int, t: np.int64) -> np.int64:  # pragma: no cover - compiled
    # When jammer j, having switched at t, switches next by its own schedule (a reactive one never does).
    mode = jam_i[j, J_MODE]
    if mode == JAM_REACTIVE:
        return INF_NS
    start, end = jam_i[j, J_FROM], jam_i[j, J_TO]
    if mode == JAM_CONSTANT:
        return end if jam_i[j, J_ON] == 1 else INF_NS
    period = jam_i[j, J_PERIOD]
    k = (t - start) // period  # the period t is in
    if jam_i[j, J_ON] == 1:
        return min(start + k * period + jam_i[j, J_ON_NS], end)
    following = start + (k + 1) * period
    return following if following < end else INF_NS


@njit(cache=True, error_model="numpy")
def jam_refresh(t: np.int64, jam_i: np.ndarray, jam_p: np.ndarray, new_p: np.ndarray, jam_s: np.ndarray,
                si: np.ndarray, sf: np.ndarray, cs_mw: float, cca_ns: np.int64, slot_ns: np.int64,
                aifs_ns: np.int64) -> None:  # pragma: no cover - compiled
    """The jammers' power at each station becomes ``new_p`` (this step's positions) at ``t``: for those
    transmitting, the power on air changes by the difference (a rise counts as new interference of the frames on
    air) and stations start or stop sensing them busy."""
    for j in range(jam_p.shape[0]):
        on = jam_i[j, J_ON] == 1
        for r in range(jam_p.shape[1]):
            old = jam_p[j, r]
            new = new_p[j, r]
            jam_p[j, r] = new
            if not on:
                continue
            d = new - old
            if d != 0.0:
                sf[F_JAM_CUR, r] = max(0.0, sf[F_JAM_CUR, r] + d)
                sf[F_CUR_POWER, r] = sf[F_JAM_CUR, r] if si[S_NLINKS, r] == 0 else sf[F_CUR_POWER, r] + d
                if d > 0.0:
                    sf[F_CUM_POWER, r] += d
                    sf[F_JAM_CUM, r] += d
            heard = new > 0.0 and new >= cs_mw
            if heard and jam_s[j, r] == 0:
                sense_start(si, r, t, cca_ns, slot_ns)
                jam_s[j, r] = 1
            elif not heard and jam_s[j, r] == 1:
                sense_end(si, sf, r, t, aifs_ns, slot_ns)
                jam_s[j, r] = 0


depends_on(globals(), ax, links, rng)
