"""The ideal channel: every interested receiver gets its sender's exact state (float64), no loss.

By default every step and without delay. ``rate_hz`` and ``delay_s`` separate what a real channel adds: messages
generated at a fixed rate and delivered a fixed time later, exactly, so the classic delay analysis of a control law
can be reproduced without the radio (and rate, delay and loss can be told apart from the channel model).
``platooning_message`` adds the sender's desired acceleration (its controller's command, ``u_des``) to each
delivery, as the platooning beacons of Plexe or the ETSI platooning work carry it; without it ``u_des`` is NaN and
laws fall back on the measured acceleration. In a scenario with maneuvers the V2X federate adds each sender's platoon
fields (``platoon_id``, ``platoon_index``, ``maneuver``, ``maneuver_peer``) to the estimate; they are delivered
exactly, like the state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numba import njit
from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.robots import RobotSpec, rows_of
from core.timebase import seconds_to_ns

from .base import OUTCOMES, CommsModel, Deliveries, Interest


class Outage(BaseModel):
    """A time window in which nothing is delivered (to every receiver, or to the listed robot ids)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    start_s: float = Field(ge=0, le=1e6, description="[s] first instant without deliveries")
    end_s: float = Field(gt=0, le=1e6, description="[s] deliveries resume at this time (at most 1e6, the longest "
                         "run; past the run's end: never)")
    receivers: list[int] | None = Field(None, description="robot ids cut off (default: all)")

    @model_validator(mode="after")
    def _ordered(self) -> Outage:
        if self.end_s <= self.start_s:
            raise ValueError(f"end_s ({self.end_s}) must be after start_s ({self.start_s})")
        return self


class IdealParams(BaseModel):
    """Parameters of the ideal channel: scheduled outages (to test degradation), a fixed rate and delay, and the
    platooning message."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    outages: list[Outage] = Field(default_factory=list)
    rate_hz: float | None = Field(None, gt=0, le=10_000, description="[Hz] messages per second (default: every "
                                  "step)")
    delay_s: float = Field(0.0, ge=0, le=10, description="[s] fixed delivery delay (rounded to the V2X step)")
    platooning_message: bool = Field(False, description="carry each sender's desired acceleration (u_des)")

_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate")
_PLATOON_FIELDS = ("platoon_id", "platoon_index", "maneuver", "maneuver_peer")


class IdealChannel(CommsModel):
    """Delivers the senders' current state to the interested receivers at every step.

    The ``estimate`` rows follow the roster order, which this model mirrors through spawn/despawn, so the rows of
    the interested senders are computed once per change of robots or interest, not per step.
    """

    Params = IdealParams

    def __init__(self, params: Mapping, seed: int, out_dir: object = None) -> None:
        super().__init__(params, seed, out_dir)
        self._outages = [
            (seconds_to_ns(o.start_s), seconds_to_ns(o.end_s), None if o.receivers is None else np.asarray(o.receivers))
            for o in IdealParams(**self.params).outages
        ]
        config = IdealParams(**self.params)
        self._period_ns = 0 if config.rate_hz is None else seconds_to_ns(1.0 / config.rate_hz)
        self._delay_ns = seconds_to_ns(config.delay_s)
        self.carries_platooning_message = config.platooning_message
        self._next_ns = 0  # next generation time with a rate
        self._in_flight: list[tuple[int, Deliveries]] = []  # (delivery time, messages), oldest first
        self._ids: list[int] = []
        # (interest, which pairs have a live sender, their sender rows, and the pairs delivered when no outage is
        # on: sender rows, receivers, senders, a NaN column), worked out once per change of robots or interest
        self._cache: tuple[Interest, np.ndarray, np.ndarray, tuple[np.ndarray, ...]] | None = None
        self._sent: tuple[int, np.ndarray] | None = None  # (time, receiver rows delivered) of the last step
        # (interest, delivered mask, the log columns that stay the same from step to step)
        self._log: tuple[Interest, np.ndarray, dict[str, np.ndarray]] | None = None

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        self._ids += [r.id for r in robots]
        self._cache = None

    def despawn(self, robot_ids: Sequence[int]) -> None:
        gone = {int(r) for r in robot_ids}
        self._ids = [i for i in self._ids if i not in gone]
        self._cache = None

    def _rows(self, interest: Interest) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        if self._cache is None or self._cache[0] is not interest:
            rows = rows_of(np.asarray(self._ids, np.int64), interest.senders, missing=-1)  # -1: sender gone
            alive = rows >= 0
            # published values are never mutated, so the pairs are shared from step to step
            pairs = (rows[alive], interest.receivers[alive], interest.senders[alive], np.full(int(alive.sum()), np.nan))
            self._cache = (interest, alive, rows, pairs)
        return self._cache[1], self._cache[2], self._cache[3]

    def step(self, t_ns: int, estimate: Mapping[str, np.ndarray], interest: Interest) -> Deliveries:
        if not self._period_ns and not self._delay_ns:
            return self._generate(t_ns, estimate, interest)
        if t_ns >= self._next_ns:
            self._next_ns = t_ns + self._period_ns if self._period_ns else 0
            generated = self._generate(t_ns, estimate, interest)
            generated["received_ns"] = generated["received_ns"] + self._delay_ns
            self._in_flight.append((t_ns + self._delay_ns, generated))
        due = [d for at, d in self._in_flight if at <= t_ns]
        self._in_flight = [(at, d) for at, d in self._in_flight if at > t_ns]
        if not due:
            return {k: v[:0] for k, v in self._empty(estimate).items()}
        return {k: np.concatenate([d[k] for d in due]) for k in due[0] if all(k in d for d in due)}

    def _empty(self, estimate: Mapping[str, np.ndarray]) -> Deliveries:
        out: Deliveries = {k: np.empty(0, np.int64) for k in ("receiver", "sender", "generated_ns", "received_ns")}
        for name in (*_FIELDS, "u_des"):
            out[name] = np.empty(0)
        return out

    def _generate(self, t_ns: int, estimate: Mapping[str, np.ndarray], interest: Interest) -> Deliveries:
        """The messages of every interested pair at ``t_ns`` (outages applied)."""
        alive, rows, pairs = self._rows(interest)
        outage = False
        for start, end, receivers in self._outages:
            if start <= t_ns < end:
                alive = alive & (False if receivers is None else ~np.isin(interest.receivers, receivers))
                outage = True
        self._sent = (t_ns, alive)
        if outage:
            rows, receiver, sender = rows[alive], interest.receivers[alive], interest.senders[alive]
            no_u_des = np.full(len(rows), np.nan)
        else:
            rows, receiver, sender, no_u_des = pairs
        now = np.full(len(rows), t_ns, dtype=np.int64)
        out: Deliveries = {"receiver": receiver, "sender": sender, "generated_ns": now, "received_ns": now}
        state = np.empty((len(_FIELDS), len(rows)))  # one pass over the rows instead of one gather per field
        _gather_state(rows, estimate["x"], estimate["y"], estimate["yaw"], estimate["v"], estimate["a"],
                      estimate["yaw_rate"], state)
        for k, name in enumerate(_FIELDS):
            out[name] = state[k]
        desired = estimate.get("u_des") if self.carries_platooning_message else None
        out["u_des"] = desired[rows] if desired is not None else no_u_des
        for name in _PLATOON_FIELDS:  # only when the estimate has them (scenarios with maneuvers)
            if name in estimate:
                out[name] = np.asarray(estimate[name], np.float64)[rows]
        return out

    def drain_records(self) -> dict[str, np.ndarray] | None:
        """The last step's log: one "sent" row per sender heard and one "received" row per delivery, all at the
        step's time (no delay). Every column but the times is the same from step to step while robots, interest
        and outages stay, so it is built once per such change and shared (published values are never mutated).
        With a rate or a delay, None: the V2X federate logs the deliveries as they arrive."""
        if self._period_ns or self._delay_ns:
            return None
        if self._sent is None or self._cache is None:
            return _empty_log()
        t_ns, alive = self._sent
        interest = self._cache[0]
        log = self._log
        if log is None or log[0] is not interest or (log[1] is not alive and not np.array_equal(log[1], alive)):
            senders = np.unique(interest.senders[alive])
            receivers = interest.receivers[alive]
            n_tx, n_rx = len(senders), len(receivers)
            kinds = np.repeat(np.array([0, 1], np.uint8), [n_tx, n_rx])  # V2X_EVENTS codes: tx, rx
            self._log = (interest, alive, {
                "event": kinds,
                "sender": np.concatenate([senders, interest.senders[alive]]),
                "receiver": np.concatenate([np.full(n_tx, -1, np.int64), receivers]),
                "latency_s": np.zeros(n_tx + n_rx),
                "rx_power_dbm": np.full(n_tx + n_rx, np.nan),
                "outcome": np.repeat(np.array([OUTCOMES.index("sent"), OUTCOMES.index("received")], np.uint8),
                                     [n_tx, n_rx]),
            })
        columns = self._log[2]
        now = np.full(len(columns["sender"]), t_ns, np.int64)
        self._sent = None
        return {"t_ns": now, "event": columns["event"], "sender": columns["sender"], "receiver": columns["receiver"],
                "generated_ns": now, "latency_s": columns["latency_s"], "rx_power_dbm": columns["rx_power_dbm"],
                "outcome": columns["outcome"]}


@njit(cache=True)
def _gather_state(rows: np.ndarray, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray, a: np.ndarray,
                  yaw_rate: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    # out[:, k] = the senders' (x, y, yaw, v, a, yaw_rate) at rows[k], in _FIELDS order
    for k in range(rows.shape[0]):
        r = rows[k]
        out[0, k] = x[r]
        out[1, k] = y[r]
        out[2, k] = yaw[r]
        out[3, k] = v[r]
        out[4, k] = a[r]
        out[5, k] = yaw_rate[r]


def _empty_log() -> dict[str, np.ndarray]:
    return {"t_ns": np.empty(0, np.int64), "event": np.empty(0, np.uint8), "sender": np.empty(0, np.int64),
            "receiver": np.empty(0, np.int64), "generated_ns": np.empty(0, np.int64), "latency_s": np.empty(0),
            "rx_power_dbm": np.empty(0), "outcome": np.empty(0, np.uint8)}
