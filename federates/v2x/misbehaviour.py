"""Attacks and misbehaviour detection around the V2X federate's channel model (``docs/security-research.md``).

``Guard`` builds the run's ``AttackPlan`` and hands it to the channel model (which forges the attackers' messages
before its encoder), and judges every delivery with the scenario's detector before the applications get it. By the
scenario's ``reaction``, a message judged misbehaving is kept (``none``), dropped (``ignore``), or the receiver stops
listening to its sender for ``hold_s`` (``fallback``: a follower's predecessor data then goes stale and its
``controller.fallback`` switches it to ACC on its own range sensor); with ``open_gap`` and ``leave`` it is kept and
its (receiver, sender) pair goes to the control federate on the ``suspicions`` port, which widens the receiver's
gap or makes it leave its platoon (``federates.control.reactions``). The verdicts are published on the
``misbehaviour`` port, one row per delivery, with the ground truth of the message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from comms_models.attacks.plan import AttackPlan, build_attacks
from comms_models.base import CommsModel, Deliveries
from comms_models.itsg5.pm import PM_COLUMNS, PM_CONTENT
from comms_models.misbehaviour import DETECTORS
from comms_models.misbehaviour.base import Detector
from comms_models.misbehaviour.history import pair_keys
from comms_models.misbehaviour.roles import ROLE_COLUMNS
from core.ports import DELIVERY_FIELDS, port
from core.robots import RobotSpec, rows_of

from .kept import KeptCams
from .suspicions import REACTS_IN_CONTROL

REACTIONS = ("none", "ignore", "fallback", *REACTS_IN_CONTROL)
CLAIMED = {name: DELIVERY_FIELDS[name] for name in ("x", "y", "yaw", "v", "a", "yaw_rate", "u_des")}
"""The delivery columns the verdict trace keeps: what each message claims (the labelled data set's content)."""
VERDICTS = ("plausible", "misbehaving")
MISBEHAVIOUR = port("misbehaviour", {
    "t_ns": ("int64", "ns"), "receiver": ("int64", "robot id"), "sender": ("int64", "robot id"),
    "generated_ns": ("int64", "ns"), "message": ("uint8", "-", ("cam", "pm")), "attack": ("int64", "-"),
    "checks": ("int64", "-"), "verdict": ("uint8", "-", VERDICTS), "dropped": ("uint8", "-", ("no", "yes")),
    **CLAIMED,
}, index="event", doc="every delivery judged by the receiver's misbehaviour detector: the attack that forged it "
   "(ground truth, 0: honest), the checks it failed (bit k: comms_models.misbehaviour.checks.CHECKS[k]), the fused "
   "verdict, whether the receiver dropped it, and what it claims as the receiver decoded it (SI, local frame; a "
   "platooning message's row carries the kinematics of the sender's newest CAM and its own u_des)")
_EXTRA = ("kind", "attack", "gn_x", "gn_y")  # delivery columns the channel adds for the guard only


class Guard:
    """The attacks and the detector of one V2X federate. ``config``: ``attacks`` (plain entries, see
    ``comms_models.attacks.plan``), ``names`` (robot name -> id) and ``detection`` (None, or ``type``, ``params``,
    ``reaction``, ``hold_s``). ``platoon_fields``: whether the applications read the platoon columns of the
    deliveries (a scenario with maneuvers); else the guard alone sees them."""

    def __init__(self, config: Mapping[str, Any], model: CommsModel, seed: int, step_ns: int,
                 platoon_fields: bool = False) -> None:
        self.extra = _EXTRA if platoon_fields else (*_EXTRA, *PM_COLUMNS)
        entries = list(config.get("attacks") or ())
        detection = config.get("detection")
        self.plan = AttackPlan(build_attacks(entries, seed, config.get("names") or {}))
        attach = getattr(model, "attach_attacks", None)
        if entries and attach is None:
            raise ValueError(f"channel model {type(model).__name__} carries no attacks (use itsg5)")
        if attach is not None:  # also without attacks: the deliveries then say which are platooning messages
            attach(self.plan)
        self.detector: Detector | None = None
        self.reaction, self.hold_ns = "none", 0
        if detection is not None:
            cls = DETECTORS.get(detection.get("type", "plausibility"))
            params = cls.Params.model_validate(dict(detection.get("params") or {}))
            honest_gap_s = getattr(model, "min_message_interval_s", None) or step_ns / 1e9
            self.detector = cls(params, 0.9 * honest_gap_s)  # 10 % slack for the step grid
            self.reaction = detection.get("reaction", "none")
            self.hold_ns = round(float(detection.get("hold_s", 1.0)) * 1e9)
        self._blocked = np.empty(0, np.int64)  # (receiver, sender) keys not listened to ...
        self._until = np.empty(0, np.int64)  # ... until then [ns]
        self._tainted = np.empty(0, np.int64)  # (receiver, sender) keys whose newest platooning message was dropped
        self._kept = KeptCams() if self.reaction == "ignore" else None  # PM rows carry kept CAMs' kinematics
        self._roles = {name: np.empty(0) for name in ("id", *ROLE_COLUMNS)}  # each station's role by its spec
        self._role_cache: tuple[tuple[np.ndarray, ...], dict[str, np.ndarray]] | None = None  # (inputs, columns)

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        """Receiving stations appear."""
        if robots:
            nan = float("nan")
            new = {"id": [r.id for r in robots], "predecessor": [nan if r.predecessor is None else r.predecessor
                                                                 for r in robots],
                   "leader": [nan if r.leader is None else r.leader for r in robots],
                   "platoon_id": [r.platoon for r in robots], "platoon_index": [r.position_in_platoon for r in robots]}
            self._roles = {name: np.concatenate([self._roles[name], np.asarray(new[name], np.float64)])
                           for name in self._roles}
            self._role_cache = None
        if self.detector is not None and robots:
            self.detector.spawn(np.array([r.id for r in robots], np.int64), np.array([r.spawn_ns for r in robots],
                                np.int64), np.array([r.dims.length_m - r.dims.rear_overhang_m for r in robots]),
                                np.array([r.dims.rear_overhang_m for r in robots]))

    def listen(self, t_ns: int, receivers: np.ndarray, senders: np.ndarray) -> None:
        """The (receiver, sender) pairs a channel that delivers only the applications' interest delivers from
        ``t_ns`` on (``Detector.listen``)."""
        if self.detector is not None:
            self.detector.listen(t_ns, receivers, senders)

    def despawn(self, ids: Sequence[int]) -> None:
        """Stations leave."""
        keep = ~np.isin(self._roles["id"], np.asarray(list(ids), np.float64))
        self._roles = {name: col[keep] for name, col in self._roles.items()}
        self._role_cache = None
        if self._kept is not None:
            self._kept.forget(np.asarray(list(ids), np.int64))
        if self.detector is not None:
            self.detector.despawn(np.asarray(list(ids), np.int64))

    def step(self, t_ns: int, deliveries: Deliveries, own: Mapping[str, np.ndarray],
             sensor: Mapping[str, np.ndarray] | None, platoon: Mapping[str, np.ndarray] | None = None
             ) -> tuple[Deliveries, dict[str, np.ndarray]]:
        """The deliveries the applications get, and the verdict of each one received. ``platoon``: the
        ``platoon_state`` of a scenario with maneuvers (each station's role now; else its spec's)."""
        n = len(deliveries["receiver"])
        kind = np.asarray(deliveries.get("kind", np.zeros(n, np.int64)), np.int64)
        attack = np.asarray(deliveries.get("attack", np.zeros(n, np.int64)), np.int64)
        apps = {name: col for name, col in deliveries.items() if name not in self.extra}
        if self.detector is None:
            checks, verdict = np.zeros(n, np.int64), np.zeros(n, bool)
        else:
            checks, verdict = self.detector.judge(t_ns, deliveries, self._with_roles(own, platoon), sensor)
        drop = self._drops(t_ns, deliveries, verdict)
        if self._kept is not None and n:
            apps, drop = self._kept.apply(apps, kind, drop)
        if self.reaction != "none" and (len(self._tainted) or (drop & (kind == 1)).any()):
            apps = self._untaint(deliveries, apps, kind, drop)
        if drop.any():
            apps = {name: col[~drop] for name, col in apps.items()}
        table = {"t_ns": np.asarray(deliveries["received_ns"], np.int64), "receiver": deliveries["receiver"],
                 "sender": deliveries["sender"], "generated_ns": deliveries["generated_ns"],
                 "message": kind.astype(np.uint8), "attack": attack, "checks": checks,
                 "verdict": verdict.astype(np.uint8), "dropped": drop.astype(np.uint8)}
        for name in CLAIMED:
            col = deliveries.get(name)
            table[name] = np.full(n, np.nan) if col is None else np.asarray(col, np.float64)
        return apps, table

    def _with_roles(self, own: Mapping[str, np.ndarray], platoon: Mapping[str, np.ndarray] | None
                    ) -> Mapping[str, np.ndarray]:
        """``own`` with each station's platoon role (``ROLE_COLUMNS``): ``platoon``'s row where it has one, else its
        spec's (kept from step to step while the stations and ``platoon`` stay the same)."""
        ids = np.asarray(own["id"], np.int64)
        key = (ids, *((np.asarray(platoon[name]) for name in ("id", *ROLE_COLUMNS)) if platoon is not None else ()))
        cached = self._role_cache
        if cached is not None and len(cached[0]) == len(key) and all(
                np.array_equal(a, b, equal_nan=a.dtype.kind == "f") for a, b in zip(cached[0], key, strict=True)):
            return {**own, **cached[1]}
        rows = rows_of(self._roles["id"].astype(np.int64), ids, missing=-1)
        there, at = rows >= 0, np.maximum(rows, 0)
        roles = {name: np.where(there, self._roles[name][at], np.nan) if len(self._roles["id"]) else
                 np.full(len(ids), np.nan) for name in ROLE_COLUMNS}
        if platoon is not None and len(platoon["id"]):
            p_rows = rows_of(np.asarray(platoon["id"], np.int64), ids, missing=-1)
            live, p_at = p_rows >= 0, np.maximum(p_rows, 0)
            for name in ROLE_COLUMNS:
                roles[name] = np.where(live, np.asarray(platoon[name], np.float64)[p_at], roles[name])
        self._role_cache = (tuple(np.array(a, copy=True) for a in key), roles)
        return {**own, **roles}

    def suspicions(self, verdicts: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The rows of ``verdicts`` judged misbehaving, as the ``suspicions`` port has them."""
        flagged = np.asarray(verdicts["verdict"]) == 1
        return {name: np.asarray(verdicts[name], np.int64)[flagged] for name in ("t_ns", "receiver", "sender")}

    def _untaint(self, deliveries: Deliveries, apps: Deliveries, kind: np.ndarray, drop: np.ndarray) -> Deliveries:
        """The channel model hands a CAM row the newest platooning fields it received from the pair, also those of
        a platooning message the receiver dropped: a kept CAM of a pair whose newest platooning message was dropped
        (before this step, or in it) carries them as unavailable (NaN) instead, until a platooning message of the
        pair is kept again. Without this a dropped forged desired acceleration reached the controller anyway."""
        keys = pair_keys(deliveries["receiver"], deliveries["sender"])
        pm = kind == 1
        stale = ~pm & ~drop & _within(keys, np.union1d(self._tainted, keys[pm & drop]))
        # the taint after this step: by each pair's last platooning message in it
        pm_rows = np.flatnonzero(pm)[::-1]  # newest first: np.unique keeps each pair's first (= last) row
        if len(pm_rows):
            settled, first = np.unique(keys[pm_rows], return_index=True)
            bad = drop[pm_rows[first]]
            self._tainted = np.union1d(self._tainted[~_within(self._tainted, settled)], settled[bad])
        if not stale.any():
            return apps
        out = dict(apps)
        for name in PM_CONTENT:
            if name in out:
                out[name] = np.where(stale, np.nan, np.asarray(out[name], np.float64))
        return out

    def _drops(self, t_ns: int, deliveries: Deliveries, verdict: np.ndarray) -> np.ndarray:
        """Which deliveries the receivers drop by the reaction."""
        if self.reaction == "ignore":
            return verdict.copy()
        if self.reaction != "fallback":
            return np.zeros(len(verdict), bool)
        keys = pair_keys(deliveries["receiver"], deliveries["sender"])
        if verdict.any():  # (re)start the hold of every pair with a misbehaving message
            flagged = np.unique(keys[verdict])
            live = self._until > t_ns
            old = live & ~np.isin(self._blocked, flagged)
            self._blocked = np.concatenate([self._blocked[old], flagged])
            self._until = np.concatenate([self._until[old], np.full(len(flagged), t_ns + self.hold_ns, np.int64)])
        live = self._until > t_ns
        self._blocked, self._until = self._blocked[live], self._until[live]
        return np.isin(keys, self._blocked)


def _within(keys: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Per key: whether it is in ``table`` (sorted, unique): one binary search each, no sort of the keys."""
    if not len(table):
        return np.zeros(len(keys), bool)
    return table[np.minimum(np.searchsorted(table, keys), len(table) - 1)] == keys
