"""The checks of a platooning message against the platoon roles the receiver knows: who leads its platoon (a
forged leader) and who may ask for which maneuver (a forged maneuver request). Each receiver's role comes with
``own`` (``predecessor``, ``leader``, ``platoon_id``, ``platoon_index``: what its platoon management says, NaN
unknown); what a message claims comes with the deliveries (``platoon_id``, ``platoon_index``, ``maneuver``,
``maneuver_peer``, and the frame's GeoNetworking position ``gn_x``, ``gn_y``)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from . import checks as ck
from .history import PairHistory, pair_keys

ROLE_COLUMNS = ("predecessor", "leader", "platoon_id", "platoon_index")
"""The receiver's platoon role, columns of ``own`` (float64, NaN: unknown)."""
MAX_TRACK_AGE_S = 3.0  # [s] a leader's last CAM older than this places it nowhere (no verdict)


def _ids(col: np.ndarray) -> np.ndarray:
    """Station ids as int64, -1 where unknown (NaN)."""
    col = np.asarray(col, np.float64)
    return np.where(np.isfinite(col), col, -1).astype(np.int64)


def receiver_roles(own: Mapping[str, np.ndarray], o_rows: np.ndarray, receiver: np.ndarray
                   ) -> dict[str, np.ndarray]:
    """Per message: its receiver's predecessor and known leader (itself when it leads; -1 unknown) and platoon id
    (NaN unknown), from ``own`` rows ``o_rows`` (-1: the receiver is not in ``own``)."""
    n = len(o_rows)
    at, there = np.maximum(o_rows, 0), o_rows >= 0

    def column(name: str) -> np.ndarray:
        col = own.get(name)
        if col is None or not len(col):
            return np.full(n, np.nan)
        return np.where(there, np.asarray(col, np.float64)[at], np.nan)

    index = column("platoon_index")
    leader = np.where(index == 0, receiver, _ids(column("leader")))
    return {"predecessor": _ids(column("predecessor")), "leader": leader, "platoon_id": column("platoon_id")}


def role_checks(rows: np.ndarray, m: Mapping[str, np.ndarray], roles: Mapping[str, np.ndarray],
                history: PairHistory, p: object) -> dict[str, np.ndarray]:
    """``leader_consistency`` and ``maneuver_entitlement`` of the platooning messages ``rows`` (the others pass).
    ``history``: the newest CAM of every pair (the leader's last claimed place); ``p``: the plausibility params."""
    n = len(m["receiver"])
    out = {"leader_consistency": np.zeros(n, bool), "maneuver_entitlement": np.zeros(n, bool)}
    if not len(rows) or "platoon_index" not in m:
        return out
    sender = np.asarray(m["sender"], np.int64)[rows]
    index = np.asarray(m["platoon_index"], np.float64)[rows]
    pid = np.asarray(m["platoon_id"], np.float64)[rows]
    leader, pred, own_pid = roles["leader"][rows], roles["predecessor"][rows], roles["platoon_id"][rows]
    known = np.isfinite(pid) & np.isfinite(own_pid)
    same = ~known | (pid == own_pid)
    # a member as the receiver itself knows it (its predecessor or its leader), not as the message claims: a join
    # request already names the platoon and the position it asks for (controllers.maneuvers)
    member = (sender == pred) | (sender == leader)
    failed = ck.leader_claim(index, sender, leader, same)
    gx, gy = m.get("gn_x"), m.get("gn_y")
    from_leader = np.flatnonzero((sender == leader) & (leader != np.asarray(m["receiver"], np.int64)[rows]))
    if gx is not None and len(from_leader) and len(history.keys):
        sel = rows[from_leader]
        pos, found = history.find(pair_keys(m["receiver"][sel], m["sender"][sel]))
        at = np.minimum(pos, len(history.keys) - 1)
        h = history.cols
        age = np.maximum((np.asarray(m["received_ns"], np.int64)[sel] - h["gen"][at]) / 1e9, 0.0)
        ahead = h["v"][at] * age
        dist = np.hypot(np.asarray(gx)[sel] - (h["x"][at] + ahead * np.cos(h["yaw"][at])),
                        np.asarray(gy)[sel] - (h["y"][at] + ahead * np.sin(h["yaw"][at])))
        placed = found & (age <= MAX_TRACK_AGE_S)
        failed[from_leader] |= placed & ck.leader_moved(dist, age, p.max_accel_mps2, p.leader_tol_m)  # type: ignore
    out["leader_consistency"][rows] = failed
    state = np.asarray(m["maneuver"], np.float64)[rows]
    peer = _ids(np.asarray(m["maneuver_peer"], np.float64)[rows])
    out["maneuver_entitlement"][rows] = ck.maneuver_entitlement(state, index, sender, peer, member, leader)
    return out
