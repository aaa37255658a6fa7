"""The platooning message service of the ITS-G5 model: when each station sends a PM, what it carries, and how
the PMs a receiver got become the platooning columns of its deliveries.

Sending: every ``1 / rate_hz`` from the station's start (its CA service start), on the channel-step grid without
drift. A PM carries the sender's desired acceleration (``estimate["u_des"]``, its controller's previous command),
its speed, the ``platoon_id`` / ``platoon_index`` / ``maneuver`` / ``maneuver_peer`` columns of the estimate when
present (else "unavailable") and its platoon leader's desired acceleration: its own for a leader (index 0 of its
platoon, or, without platoon columns, a station that listens to nobody), else the newest one it received over PMs
from its leader (relayed, "unavailable" when older than ``max_age_s``).

Receiving (``PmReceptions.merge``, one compiled pass over the receptions due, in arrival order), per (receiver,
sender) pair:

- a CAM row keeps its own state and generation time and gets the newest PM fields of the pair (NaN when none, or
  when that PM was generated more than ``max_age_s`` before the row is delivered);
- a PM row becomes its own delivery row: its platooning fields, with the kinematic columns of the newest CAM the
  receiver holds from that sender and ``generated_ns`` = that CAM's generation time + n ns (n-th PM since it).
  The control federate keeps a delivery only when it is newer than what it holds, so the PM is taken, while the
  age it computes (and the CTRV prediction from it) stays the age of the kinematic data, within n ns. A PM that
  arrives before any CAM of the pair, or older than the newest PM, gives no row (its fields ride on the next
  CAM).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numba import njit

from .platooning import quantise_pm

PM_CONTENT = ("u_des", "platoon_id", "platoon_index", "maneuver", "maneuver_peer", "u_leader")
"""The six content columns a PM frame carries through the medium (``access.N_CONTENT``), as receivers decode
them."""
PM_COLUMNS = ("platoon_id", "platoon_index", "maneuver", "maneuver_peer")
"""Estimate columns a PM carries besides ``u_des``; returned in deliveries only when the estimate has them."""
_KINEMATIC = ("x", "y", "yaw", "v", "a", "yaw_rate")
_DELIVERED = ("u_des", *PM_COLUMNS)
_MAX_PM_ROWS_PER_CAM = 999_999  # keeps cam generated_ns + n below the next CAM's (>= 1 ms later)


@njit(cache=True)
def _check_rate(t_ns, next_pm, period_ns, send):  # pragma: no cover - compiled
    for i in range(next_pm.shape[0]):
        send[i] = t_ns >= next_pm[i]
        if send[i]:
            # the nominal schedule, unless more than a period behind (a coarse step grid)
            next_pm[i] = t_ns + period_ns if t_ns - next_pm[i] >= period_ns else next_pm[i] + period_ns


class PmSchedule:
    """Per-station next PM time (rows in spawn order)."""

    def __init__(self, rate_hz: float) -> None:
        self.period_ns = round(1e9 / rate_hz)
        self.next_pm = np.empty(0, np.int64)

    def spawn(self, first_ns: np.ndarray) -> None:
        """Stations whose first PM is due at ``first_ns``."""
        self.next_pm = np.concatenate([self.next_pm, np.asarray(first_ns, np.int64)])

    def despawn(self, keep: np.ndarray) -> None:
        """Keep the rows where ``keep`` is True."""
        self.next_pm = self.next_pm[keep]

    def due(self, t_ns: int) -> np.ndarray:
        """Mask of the stations that send a PM at ``t_ns`` (their schedule advances)."""
        send = np.empty(len(self.next_pm), np.bool_)
        _check_rate(np.int64(t_ns), self.next_pm, np.int64(self.period_ns), send)
        return send


def pm_content(estimate: Mapping[str, np.ndarray], rows: np.ndarray, u_leader: np.ndarray) -> tuple[
        dict[str, np.ndarray], np.ndarray]:
    """The SI fields of the PMs of estimate ``rows`` (for the codec) and their decoded content (``PM_CONTENT``
    columns, ``len(rows)`` x 6), quantised as on the wire."""
    n = len(rows)

    def column(name: str) -> np.ndarray:
        values = estimate.get(name)
        return np.full(n, np.nan) if values is None else np.asarray(values, np.float64)[rows]

    si = {"u_des": column("u_des"), "u_leader": np.asarray(u_leader, np.float64), "v": column("v"),
          **{name: column(name) for name in PM_COLUMNS}}
    return si, pm_quantised(si)


def pm_quantised(si: Mapping[str, np.ndarray]) -> np.ndarray:
    """The decoded content (``PM_CONTENT`` columns, one row per PM) of PMs carrying the SI fields ``si``."""
    q = quantise_pm(si)
    n = len(q["u_des"])
    return np.column_stack([q[name] for name in PM_CONTENT]) if n else np.empty((0, len(PM_CONTENT)))


@njit(cache=True)
def _merge(pair, kind, gen, received, kin, pm, cam_gen, cam_kin, pm_gen, pm_val, n_since, max_age_ns,
           keep, out_gen, out_kin, out_pm):  # pragma: no cover - compiled
    for j in range(pair.shape[0]):
        p = pair[j]
        keep[j] = True
        if kind[j] == 0:  # CAM: its own state, the pair's newest PM fields
            if gen[j] > cam_gen[p]:
                cam_gen[p] = gen[j]
                n_since[p] = 0
                for c in range(kin.shape[0]):
                    cam_kin[c, p] = kin[c, j]
            out_gen[j] = gen[j]
            for c in range(kin.shape[0]):
                out_kin[c, j] = kin[c, j]
            fresh = pm_gen[p] >= 0 and received[j] - pm_gen[p] <= max_age_ns
            for c in range(pm_val.shape[0]):
                out_pm[c, j] = pm_val[c, p] if fresh else np.nan
        else:  # PM: the pair's newest CAM state, its own fields
            if gen[j] <= pm_gen[p]:
                keep[j] = False
                continue
            pm_gen[p] = gen[j]
            for c in range(pm_val.shape[0]):
                pm_val[c, p] = pm[c, j]
            if cam_gen[p] < 0 or n_since[p] >= _MAX_PM_ROWS_PER_CAM:
                keep[j] = False
                continue
            n_since[p] += 1
            out_gen[j] = cam_gen[p] + n_since[p]
            for c in range(kin.shape[0]):
                out_kin[c, j] = cam_kin[c, p]
            for c in range(pm_val.shape[0]):
                out_pm[c, j] = pm[c, j]


class PmReceptions:
    """What each receiver holds per sender (newest CAM state, newest PM fields) and the merge of due receptions
    into deliveries. Pairs are kept in a sorted key array (receiver id << 32 | sender id)."""

    def __init__(self, max_age_s: float) -> None:
        self.max_age_ns = round(max_age_s * 1e9)
        self.keys = np.empty(0, np.int64)
        self.cam_gen = np.empty(0, np.int64)
        self.cam_kin = np.empty((len(_KINEMATIC), 0))
        self.pm_gen = np.empty(0, np.int64)
        self.pm_val = np.empty((len(PM_CONTENT), 0))
        self.n_since = np.empty(0, np.int64)

    def _pairs(self, receiver: np.ndarray, sender: np.ndarray) -> np.ndarray:
        """Pair indices of the rows, new pairs added (nothing held)."""
        keys = (np.asarray(receiver, np.int64) << 32) | np.asarray(sender, np.int64)
        if len(self.keys):
            at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
            if (self.keys[at] == keys).all():  # the usual step: no new pair
                return at
        new = np.setdiff1d(keys, self.keys)
        if len(new):
            merged = np.concatenate([self.keys, new])
            order = np.argsort(merged, kind="stable")
            m = len(new)
            self.keys = merged[order]
            self.cam_gen = np.concatenate([self.cam_gen, np.full(m, -1, np.int64)])[order]
            self.cam_kin = np.ascontiguousarray(
                np.hstack([self.cam_kin, np.full((len(_KINEMATIC), m), np.nan)])[:, order])
            self.pm_gen = np.concatenate([self.pm_gen, np.full(m, -1, np.int64)])[order]
            self.pm_val = np.ascontiguousarray(
                np.hstack([self.pm_val, np.full((len(PM_CONTENT), m), np.nan)])[:, order])
            self.n_since = np.concatenate([self.n_since, np.zeros(m, np.int64)])[order]
        return np.searchsorted(self.keys, keys)

    def forget(self, robot_ids: np.ndarray) -> None:
        """Drop the pairs in which any of ``robot_ids`` takes part."""
        ids = np.asarray(robot_ids, np.int64)
        keep = ~(np.isin(self.keys >> 32, ids) | np.isin(self.keys & 0xFFFFFFFF, ids))
        self.keys, self.cam_gen, self.pm_gen, self.n_since = (a[keep] for a in (self.keys, self.cam_gen, self.pm_gen,
                                                                                 self.n_since))
        self.cam_kin = np.ascontiguousarray(self.cam_kin[:, keep])
        self.pm_val = np.ascontiguousarray(self.pm_val[:, keep])

    def newest_u_des(self, receiver: np.ndarray, sender: np.ndarray, t_ns: int) -> np.ndarray:
        """The desired acceleration each ``receiver`` holds from ``sender`` over PMs (NaN: none, or older than
        ``max_age_s`` at ``t_ns``); pairs never seen are not added."""
        out = np.full(len(receiver), np.nan)
        if not len(self.keys) or not len(receiver):
            return out
        keys = (np.asarray(receiver, np.int64) << 32) | np.asarray(sender, np.int64)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        found = (self.keys[at] == keys) & (self.pm_gen[at] >= 0) & (t_ns - self.pm_gen[at] <= self.max_age_ns)
        out[found] = self.pm_val[PM_CONTENT.index("u_des"), at[found]]
        return out

    def merge(self, due: Mapping[str, np.ndarray], columns: tuple[str, ...]) -> dict[str, np.ndarray]:
        """The deliveries of the receptions ``due`` (in arrival order; ``kind`` 0 CAM, 1 PM, and the ``PM_CONTENT``
        columns): see the module docstring. ``columns``: the ``PM_COLUMNS`` to return besides ``u_des``."""
        n = len(due["receiver"])
        pair = self._pairs(due["receiver"], due["sender"])
        kin = np.ascontiguousarray(np.stack([np.asarray(due[c], np.float64) for c in _KINEMATIC])) if n else \
            np.empty((len(_KINEMATIC), 0))
        pm = np.ascontiguousarray(np.stack([np.asarray(due[c], np.float64) for c in PM_CONTENT])) if n else \
            np.empty((len(PM_CONTENT), 0))
        keep = np.empty(n, np.bool_)
        out_gen = np.empty(n, np.int64)
        out_kin = np.empty_like(kin)
        out_pm = np.empty_like(pm)
        _merge(pair, np.asarray(due["kind"], np.int64), np.asarray(due["generated_ns"], np.int64),
               np.asarray(due["received_ns"], np.int64), kin, pm, self.cam_gen, self.cam_kin, self.pm_gen,
               self.pm_val, self.n_since, np.int64(self.max_age_ns), keep, out_gen, out_kin, out_pm)
        out: dict[str, np.ndarray] = {
            "receiver": np.asarray(due["receiver"], np.int64)[keep],
            "sender": np.asarray(due["sender"], np.int64)[keep],
            "generated_ns": out_gen[keep],
            "received_ns": np.asarray(due["received_ns"], np.int64)[keep],
        }
        for c, name in enumerate(_KINEMATIC):
            out[name] = out_kin[c, keep]
        for name in ("u_des", *columns):
            out[name] = out_pm[PM_CONTENT.index(name), keep]
        if "attack" in due:  # a run with attacks or detection: each row's message kind and ground truth, every
            # platooning column and the frame's GeoNetworking position (what the detector judges)
            out["kind"] = np.asarray(due["kind"], np.int64)[keep]
            out["attack"] = np.asarray(due["attack"], np.int64)[keep]
            for name in PM_COLUMNS:
                if name not in out:
                    out[name] = out_pm[PM_CONTENT.index(name), keep]
            for name in ("gn_x", "gn_y"):
                if name in due:
                    out[name] = np.asarray(due[name], np.float64)[keep]
        return out


def delivered_columns(estimate: Mapping[str, np.ndarray]) -> tuple[str, ...]:
    """The ``PM_COLUMNS`` the estimate has (those the deliveries carry)."""
    return tuple(name for name in PM_COLUMNS if estimate.get(name) is not None)


def empty_pm_deliveries(columns: tuple[str, ...]) -> dict[str, np.ndarray]:
    """A delivery table with no rows and the platooning columns."""
    out: dict[str, np.ndarray] = {k: np.empty(0, np.int64) for k in ("receiver", "sender", "generated_ns",
                                                                     "received_ns")}
    for name in (*_KINEMATIC, *_DELIVERED[:1], *columns):
        out[name] = np.empty(0)
    return out


def interest_leaders(ids: np.ndarray, s_rows: np.ndarray, r_rows: np.ndarray) -> np.ndarray:
    """Per station row, the id of the platoon leader it listens to: among the senders it is interested in, the one
    that listens to nobody (-1: it listens to nobody, so it leads; -2: it listens to no such station)."""
    n = len(ids)
    listens = np.zeros(n, bool)
    listens[r_rows] = True
    out = np.where(listens, np.int64(-2), np.int64(-1))
    roots = ~listens[s_rows]  # pairs whose sender follows nobody
    # the first such sender of each receiver (pairs in interest order)
    rr, ss = r_rows[roots][::-1], s_rows[roots][::-1]
    out[rr] = ids[ss]
    return out


def platoon_leaders(estimate: Mapping[str, np.ndarray], ids: np.ndarray, rows: np.ndarray,
                     by_interest: np.ndarray) -> np.ndarray:
    """The leader of each station of ``rows`` (an id; -1: it leads; -2: unknown). Where the estimate has a platoon
    (``platoon_id`` and ``platoon_index``, as in runs with maneuvers): the station of that platoon at index 0;
    elsewhere ``by_interest`` (``interest_leaders``)."""
    pid, pidx = estimate.get("platoon_id"), estimate.get("platoon_index")
    if pid is None or pidx is None:
        return by_interest
    pid, pidx = np.asarray(pid, np.float64), np.asarray(pidx, np.float64)
    heads = np.flatnonzero((pidx == 0) & np.isfinite(pid))
    order = np.argsort(pid[heads], kind="stable")
    head_pid, head_id = pid[heads][order], ids[heads][order]
    mine = pid[rows]
    at = np.minimum(np.searchsorted(head_pid, mine), max(len(head_pid) - 1, 0))
    found = np.isfinite(mine) & (len(head_pid) > 0)
    found &= (head_pid[at] == mine) if len(head_pid) else False
    in_platoon = np.isfinite(mine) & np.isfinite(pidx[rows])
    by_platoon = np.where(pidx[rows] == 0, -1, np.where(found, head_id[at] if len(head_id) else -2, -2))
    return np.where(in_platoon, by_platoon, by_interest).astype(np.int64)
