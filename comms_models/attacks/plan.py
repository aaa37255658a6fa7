"""A run's attacks, applied by a channel model: which stations send added frames, the forged content of each
station's messages, and the ground truth of every frame (its attack's label and the station id it claims).

Built from plain entries (``{"robot": id, "type": name, "params": {...}, "from_ns": ..., "to_ns": ...}``, the label
being the entry's position plus one), so a hosted V2X federate builds the same plan. Forging costs one pass per
attack over the messages of the instant (masks over every station at once), and nothing when no attacker sends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from core.ports import FieldSpec
from core.rng import purpose_key

from . import ATTACKS
from .base import NEVER_NS, Attack, AttackContext

ATTACK_FIELD = ("attack", "int64", "-")
"""The ground-truth column of ``trace/v2x.parquet`` in runs with attacks: the label of the attack that forged the
frame (its index in the scenario's ``attacks`` plus one), 0 for an honest one."""

TRUE_GEN_FIELD = ("true_generated_ns", "int64", "ns")
"""Beside it: when the frame was really generated (``generated_ns`` is the time it claims, which a delayed message
forges older); the data set's true state of the sender is taken at this time."""

JAMMER_FIELD = ("jammer", "int64", "-")
"""The cause column of ``trace/v2x.parquet`` in runs with jammers: on a frame dropped before the air
(``dcc_dropped``), the label of the jammer whose power held its station's medium busy then (the frame waited for
a medium the jammer kept busy and was replaced, or the DCC gatekeeper the jammer's load tightened dropped it);
0 for any other row."""


def with_attack_column(log_port: Any, jammers: bool = False) -> Any:
    """``log_port`` (the V2X log's contract) with the ground-truth column (and with ``jammers`` the cause)."""
    extra = (FieldSpec(*ATTACK_FIELD), FieldSpec(*TRUE_GEN_FIELD), *((FieldSpec(*JAMMER_FIELD),) if jammers else ()))
    return replace(log_port, fields=(*log_port.fields, *extra))


def build_attacks(entries: Sequence[Mapping[str, Any]], seed: int, ids_of: Mapping[str, int]) -> list[Attack]:
    """One attack per entry, its draws keyed by the seed and its position in the list."""
    attacks = []
    for k, entry in enumerate(entries):
        cls = ATTACKS.get(entry["type"])
        params = cls.Params.model_validate(dict(entry.get("params") or {}))
        to_ns = entry.get("to_ns")
        ctx = AttackContext(robot=int(entry["robot"]), label=k + 1, from_ns=int(entry.get("from_ns", 0)),
                            to_ns=NEVER_NS if to_ns is None else int(to_ns),
                            key=purpose_key(seed, "attacks", k), ids_of=dict(ids_of))
        attacks.append(cls(params, ctx))
    return attacks


class AttackPlan:
    """The attacks of a run and the ground truth of the frames they touched (kept for forged frames only)."""

    def __init__(self, attacks: Sequence[Attack]) -> None:
        self.attacks = list(attacks)
        self.robots = np.array([a.ctx.robot for a in self.attacks], np.int64)
        self._sorted_robots = np.unique(self.robots)
        self._observers = [a for a in self.attacks if type(a).observe is not Attack.observe]  # e.g. replays
        watched = [a.watched() for a in self._observers]
        self._watched = np.array([-1 if w is None else w for w in watched], np.int64)  # -1: every station
        self.jammers = [a for a in self.attacks if a.message == "air"]  # they act on the channel (its medium)
        self._adders = [a for a in self.attacks if a.message == "cam" and a.extra_frames]  # DoS, ghosts
        # per message kind: its attacks (in list order) and their windows, to pick the active ones with one compare
        self._by_kind = {kind: [a for a in self.attacks if a.message == kind] for kind in ("cam", "pm")}
        self._windows = {kind: (np.array([a.ctx.from_ns for a in group], np.int64),
                                np.array([a.ctx.to_ns for a in group], np.int64),
                                np.array([a.ctx.robot for a in group], np.int64))
                         for kind, group in self._by_kind.items()}
        # forged frames' serials (increasing), their labels, claimed ids and claimed generation times
        self._parts: tuple[list[np.ndarray], ...] = ([], [], [], [])
        self._index: tuple[np.ndarray, ...] | None = None

    def _active(self, t_ns: int, message: str, senders: np.ndarray | None = None) -> list[Attack]:
        """The attacks on ``message`` active at ``t_ns`` (in list order); with ``senders``, only those whose
        station is among them (a step's senders are a few of the stations: the others' attacks cost nothing)."""
        group = self._by_kind[message]
        if not group:
            return []
        lo, hi, robots = self._windows[message]
        on = (lo <= t_ns) & (t_ns < hi)
        if senders is not None:
            on &= _within(robots, np.sort(senders))
        return [group[k] for k in np.flatnonzero(on).tolist()]

    # -- generation ------------------------------------------------------------------------------------------------
    def extra_cams(self, t_ns: int, ids: np.ndarray, send: np.ndarray) -> np.ndarray:
        """Stations (mask over ``ids``) that send an added CAM at ``t_ns``: a DoS's raised rate or a ghost's frame,
        only where the station has no CAM of its own now (the added frame waits for the next step otherwise)."""
        extra = np.zeros(len(ids), bool)
        for attack in self._adders:
            if not attack.ctx.active(t_ns):
                continue
            rows = np.flatnonzero(ids == attack.ctx.robot)
            if len(rows) and not send[rows[0]] and not extra[rows[0]] and attack.extra_due(t_ns):
                extra[rows[0]] = True
        return extra

    def forge_cam(self, t_ns: int, senders: np.ndarray, extra: np.ndarray, values: dict[str, np.ndarray]
                  ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
        """The CAM content of ``senders`` (one row each; ``extra``: the added frames; ``values``: ``CAM_FIELDS``
        and ``lf``) after the attacks, each row's label, the station id and the generation time it claims."""
        labels = np.zeros(len(senders), np.int64)
        claimed = senders.copy()
        generated = np.full(len(senders), t_ns, np.int64)
        if self._observers:  # those that watch a station only when it sends
            seen = (self._watched < 0) | _within(self._watched, np.sort(senders))
            for k in np.flatnonzero(seen).tolist():
                self._observers[k].observe(t_ns, senders, values)
        active = self._active(t_ns, "cam", senders)
        sending = np.flatnonzero(_within(senders, self._sorted_robots)) if active else senders[:0]  # attackers' rows
        copied = False
        for attack in active:
            rows = sending[senders[sending] == attack.ctx.robot]
            if attack.only_extra:
                rows = rows[extra[rows]]
            rows = rows[labels[rows] == 0]
            if not len(rows):
                continue
            forged = attack.forge(t_ns, {name: col[rows] for name, col in values.items()})
            if not copied:  # the caller's columns stay untouched; one copy for all the attacks
                values = {name: col.copy() for name, col in values.items()}
                copied = True
            for name in values:
                if name in forged:
                    values[name][rows] = forged[name]
            if "generated_ns" in forged:
                generated[rows] = forged["generated_ns"]
            labels[rows] = attack.ctx.label
            claim = attack.claimed_id()
            if claim is not None:
                claimed[rows] = claim
        return values, labels, claimed, generated

    def forge_pm(self, t_ns: int, senders: np.ndarray, u_des: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The desired accelerations the PMs of ``senders`` carry after the attacks, and each row's label."""
        labels = np.zeros(len(senders), np.int64)
        for attack in self._active(t_ns, "pm", senders):
            if attack.pm_fields != ("u_des",):
                continue
            rows = np.flatnonzero((senders == attack.ctx.robot) & (labels == 0))
            if len(rows):
                u_des = u_des.copy()
                u_des[rows] = attack.forge(t_ns, {"u_des": u_des[rows]})["u_des"]
                labels[rows] = attack.ctx.label
        return u_des, labels

    def forge_pm_fields(self, t_ns: int, senders: np.ndarray, si: dict[str, np.ndarray], labels: np.ndarray
                        ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """The filled PMs of ``senders`` (``si``: SI fields, one row each; ``labels``: rows already forged by
        ``forge_pm``) after the attacks on other fields than the desired acceleration, each row's label and the
        station id it claims. ``si`` comes back as given when no such attack acts."""
        claimed = senders
        copied = False
        for attack in self._active(t_ns, "pm", senders):
            if attack.pm_fields == ("u_des",):
                continue
            rows = np.flatnonzero((senders == attack.ctx.robot) & (labels == 0))
            if not len(rows):
                continue
            forged = attack.forge(t_ns, {name: np.asarray(col, np.float64)[rows] for name, col in si.items()})
            if not copied:  # the caller's columns stay untouched
                si = {name: np.array(col, np.float64) for name, col in si.items()}
                labels, claimed, copied = labels.copy(), senders.copy(), True
            for name in si:
                si[name][rows] = forged[name]
            labels[rows] = attack.ctx.label
            claim = attack.claimed_id()
            if claim is not None:
                claimed[rows] = claim
        return si, labels, claimed

    # -- ground truth of frames ------------------------------------------------------------------------------------
    def mark(self, frames: np.ndarray, labels: np.ndarray, claimed: np.ndarray,
             generated: np.ndarray | None = None) -> None:
        """Remember the forged frames among ``frames`` (serials increase from call to call), with the station id
        and generation time each claims (``generated`` None: the true one, -1 in the index)."""
        forged = labels != 0
        if forged.any():
            gen = np.full(len(frames), -1, np.int64) if generated is None else np.asarray(generated, np.int64)
            for part, column in zip(self._parts, (frames, labels, claimed, gen), strict=True):
                part.append(np.asarray(column, np.int64)[forged])
            self._index = None

    def _lookup(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        """Per frame: the position of its entry among the forged frames, whether it has one, and the index."""
        if self._index is None:
            self._index = tuple(_cat(part) for part in self._parts)
            self._parts = tuple([column] for column in self._index)
        index = self._index
        known = index[0]
        if not len(known):
            return np.zeros(len(frames), np.int64), np.zeros(len(frames), bool), (np.zeros(1, np.int64),) * 4
        at = np.minimum(np.searchsorted(known, frames), len(known) - 1)
        return at, known[at] == frames, index

    def truth(self, frames: np.ndarray, senders: np.ndarray, generated: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per frame: its attack label (0: honest), the station id and the generation time it claims (its
        sender's and its true one unless forged)."""
        at, found, index = self._lookup(np.asarray(frames, np.int64))
        labels = np.where(found, index[1][at], 0).astype(np.int64)
        claimed = np.where(found, index[2][at], senders).astype(np.int64)
        gen = np.where(found & (index[3][at] >= 0), index[3][at], generated).astype(np.int64)
        return labels, claimed, gen

    def labels(self, frames: np.ndarray) -> np.ndarray:
        """The attack label of each frame (0: honest)."""
        frames = np.asarray(frames, np.int64)
        return self.truth(frames, frames, frames)[0]

    def claimed(self, frames: np.ndarray, senders: np.ndarray) -> np.ndarray:
        """The station id each frame claims (its sender's, unless forged under another)."""
        frames = np.asarray(frames, np.int64)
        return self.truth(frames, senders, frames)[1]

    def label_at(self, senders: np.ndarray, generated_ns: np.ndarray, pm: bool) -> np.ndarray:
        """The label of messages dropped before the air (no frame): the attack acting on their sender and kind at
        their generation time (a ghost's or a DoS's added frames are not told apart there)."""
        labels = np.zeros(len(senders), np.int64)
        for attack in self.attacks:
            if attack.message != ("pm" if pm else "cam") or attack.only_extra:  # jammers ("air") never match
                continue
            c = attack.ctx
            labels[(labels == 0) & (senders == c.robot) & (generated_ns >= c.from_ns) & (generated_ns < c.to_ns)] = \
                c.label
        return labels


def _within(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Per value: whether it is in ``table`` (sorted): a binary search each (np.isin sorts both every call)."""
    if not len(table):
        return np.zeros(len(values), bool)
    return table[np.minimum(np.searchsorted(table, values), len(table) - 1)] == values


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, np.int64)
