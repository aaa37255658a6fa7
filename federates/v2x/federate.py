"""The V2X federate: hosts one channel model, a station per robot, and publishes every transmission and reception.

It reads what each vehicle believes about itself (``estimate``) and what its driver or controller asks of it
(``commands``, from the previous instant: ``accel`` is the desired acceleration a platooning message carries), and
publishes the receptions completed by now (``cam_rx``). The applications' interest (each follower's predecessor and
leader) comes from the robot specs; in a scenario with maneuvers it follows the control federate's ``platoon_state``
(whose messages each robot uses as predecessor, leader and maneuver partner), and the deliveries carry the senders'
platoon fields (``CAM_RX_PLATOONING``), NaN where the channel model did not carry them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from comms_models import COMMS_MODELS
from comms_models.base import OUTCOMES, CommsModel, Interest
from core.federate import Federate, FederateMeta, Input, SetupContext
from core.ports import (
    CAM_RX,
    CAM_RX_PLATOONING,
    CAM_TRIGGER_PORT,
    CHANNEL_LOAD,
    COMMANDS,
    ESTIMATE,
    PLATOON_MESSAGE_FIELDS,
    PLATOON_STATE,
    RANGE,
    V2X_EVENTS,
    V2X_LOG,
    fields_of,
)
from core.robots import RobotSpec, rows_of

from .misbehaviour import MISBEHAVIOUR, Guard
from .suspicions import REACTS_IN_CONTROL, SUSPICIONS


class V2XFederate(Federate):
    """Steps its channel model every ``step_ns``. When the run records, it also publishes every transmission and
    reception (``v2x``), the channel load with the DCC state (``channel_load``) and why each CAM was generated
    (``cam_triggers``, from a model with generation rules), which the recorder writes like any port."""

    def __init__(self, name: str, step_ns: int, channel: Mapping[str, Any], trace: bool = True,
                 maneuvers: bool = False, misbehaviour: Mapping[str, Any] | None = None) -> None:
        super().__init__(name)
        self.misbehaviour = misbehaviour  # attacks and detection (``misbehaviour.Guard``), None: neither
        self.guard: Guard | None = None
        self.maneuvers = maneuvers  # the platoon fields travel, and the interest follows ``platoon_state``
        self._listening: tuple[np.ndarray, ...] | None = None  # the platoon_state columns the interest was built from
        self.record = trace
        self.step_ns = step_ns
        self.channel_config = dict(channel)
        self.model: CommsModel | None = None
        # the spec's interest: every live robot, and (receiver, sender) pairs grouped by receiver in spawn order,
        # each receiver's senders (its predecessor and leader) ascending
        self._alive = np.empty(0, np.int64)
        self._rx = np.empty(0, np.int64)
        self._tx = np.empty(0, np.int64)
        self._interest = Interest(np.empty(0, np.int64), np.empty(0, np.int64))
        self._triggers = False  # whether the model reports why it generated each CAM (cam_triggers)
        self._told: Interest | None = None  # the interest the guard's detector last heard of

    logs_transmissions = False
    """Whether the channel model logs every transmission (its ``logs_every_transmission``: ITS-G5 does; the ideal
    channel logs the senders someone heard, so a station nobody listens to shows no "sent" rows)."""

    def setup(self, ctx: SetupContext) -> FederateMeta:
        params = dict(self.channel_config)
        kind = params.pop("type")
        self.model = COMMS_MODELS.get(kind)(params, ctx.seed, ctx.out_dir)
        self.logs_transmissions = bool(getattr(self.model, "logs_every_transmission", False))
        self.record = self.record and ctx.out_dir is not None  # nothing is recorded without a run directory
        self.model.keep_log = self.record
        if self.misbehaviour is not None:
            self.guard = Guard(self.misbehaviour, self.model, ctx.seed, self.step_ns, platoon_fields=self.maneuvers)
        cam_rx = CAM_RX_PLATOONING if self.maneuvers else CAM_RX
        outputs: tuple = (cam_rx,)
        if self.record:
            models_load = type(self.model).drain_load is not CommsModel.drain_load
            self._triggers = type(self.model).drain_triggers is not CommsModel.drain_triggers
            log_port = getattr(self.model, "log_port", V2X_LOG)  # a model may log more columns (cv2x: resources)
            outputs = (cam_rx, log_port, *((CHANNEL_LOAD,) if models_load else ()),
                       *((CAM_TRIGGER_PORT,) if self._triggers else ()))
        inputs: tuple = (Input("estimate", fields=ESTIMATE.fields),
                         Input("commands", delayed=True, optional=True, fields=fields_of(COMMANDS, ["accel"])))
        if self.maneuvers:
            inputs += (Input("platoon_state", delayed=True, optional=True, fields=PLATOON_STATE.fields),)
        if self.guard is not None:  # the detector compares claims with the receiver's own range sensor
            inputs += (Input("range", optional=True, fields=RANGE.fields),)
            outputs += (MISBEHAVIOUR,) if self.record else ()
            outputs += (SUSPICIONS,) if self.guard.reaction in REACTS_IN_CONTROL else ()
        return FederateMeta(inputs=inputs, outputs=outputs, period_ns=self.step_ns)

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        assert self.model is not None
        self.model.spawn(robots)
        if self.guard is not None:
            self.guard.spawn(robots)
        ids = np.array([spec.id for spec in robots], np.int64)
        pred = np.array([-1 if spec.predecessor is None else spec.predecessor for spec in robots], np.int64)
        lead = np.array([-1 if spec.leader is None else spec.leader for spec in robots], np.int64)
        first = np.where(pred < 0, lead, pred)
        second = np.where(pred < 0, -1, lead)
        low = np.where(second < 0, first, np.minimum(first, second))
        high = np.where((second < 0) | (second == first), -1, np.maximum(first, second))
        senders = np.stack([low, high], axis=1)
        listens = senders >= 0
        self._alive = np.concatenate([self._alive, ids])
        self._rx = np.concatenate([self._rx, np.repeat(ids[:, None], 2, axis=1)[listens]])
        self._tx = np.concatenate([self._tx, senders[listens]])
        self._rebuild_interest()

    def despawn(self, robot_ids: Sequence[int]) -> None:
        assert self.model is not None
        self.model.despawn(robot_ids)
        if self.guard is not None:
            self.guard.despawn(robot_ids)
        gone = np.asarray(list(robot_ids), np.int64)
        self._alive = self._alive[~np.isin(self._alive, gone)]
        keep = ~np.isin(self._rx, gone)
        self._rx, self._tx = self._rx[keep], self._tx[keep]
        self._rebuild_interest()

    def _rebuild_interest(self) -> None:
        self._interest = Interest(self._rx.copy(), self._tx.copy())
        self._listening = None

    def _follow_platoon_state(self, state: Mapping[str, np.ndarray]) -> None:
        """The interest of a scenario with maneuvers: each live robot's predecessor, leader and maneuver partner as
        ``platoon_state`` says (rebuilt only when one of them changed)."""
        columns = (state["id"], state["predecessor"], state["leader"], state["maneuver_peer"])
        if self._listening is not None and all(np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f" else
                                               np.array_equal(a, b) for a, b in zip(columns, self._listening,
                                                                                    strict=True)):
            return
        alive = self._alive
        ids = np.asarray(state["id"], np.int64)
        receivers = np.concatenate([ids, ids, ids])
        senders = np.concatenate([np.asarray(c, np.float64) for c in columns[1:]])
        ok = np.isfinite(senders) & np.isin(receivers, alive)
        ok[ok] &= np.isin(senders[ok].astype(np.int64), alive)
        pairs = np.unique(np.stack([receivers[ok], senders[ok].astype(np.int64)], axis=1), axis=0)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        unknown = ~np.isin(self._rx, ids)  # robots the control federate has not published yet keep their spec's pairs
        if unknown.any():
            extra = np.stack([self._rx[unknown], self._tx[unknown]], axis=1)
            pairs = np.unique(np.vstack([pairs, extra]), axis=0)
        self._interest = Interest(np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1]))
        self._listening = tuple(np.array(c, copy=True) for c in columns)

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        estimate = inputs["estimate"]
        commands = inputs.get("commands")
        if self.model.carries_platooning_message and commands is not None and len(commands["id"]):
            # the senders' desired accelerations, in estimate rows (only for a model that sends them)
            rows = rows_of(commands["id"], estimate["id"], missing=-1)
            desired = np.where(rows >= 0, np.asarray(commands["accel"])[rows], np.nan)
            estimate = {**estimate, "u_des": desired}
        if self.maneuvers:
            estimate = self._with_platoon_fields(estimate, inputs.get("platoon_state"))
        deliveries = self.model.step(t_ns, estimate, self._interest)
        verdicts = None
        if self.guard is not None:
            if self._interest is not self._told and self.channel_config.get("deliver", "interest") != "all":
                self.guard.listen(t_ns, self._interest.receivers, self._interest.senders)  # its pairs heard since
                self._told = self._interest
            deliveries, verdicts = self.guard.step(t_ns, deliveries, inputs["estimate"], inputs.get("range"),
                                                   inputs.get("platoon_state"))
        if "u_des" not in deliveries:  # a model that carries no platooning message
            deliveries = {**deliveries, "u_des": np.full(len(deliveries["receiver"]), np.nan)}
        if self.maneuvers:  # fields a model did not carry are absent (NaN)
            n = len(deliveries["receiver"])
            deliveries = {**deliveries, **{name: np.full(n, np.nan) for name in PLATOON_MESSAGE_FIELDS
                                           if name not in deliveries}}
        reacting = {} if verdicts is None or self.guard.reaction not in REACTS_IN_CONTROL else \
            {"suspicions": self.guard.suspicions(verdicts)}  # type: ignore[union-attr]
        if not self.record:  # the model keeps no log then (keep_log): nothing to drain
            return {"cam_rx": deliveries, **reacting}
        records = self.model.drain_records()
        load = self.model.drain_load()
        log = _as_codes(records) if records is not None else _log(deliveries)
        if "message" not in log:  # a model that sends CAMs only
            log = {**log, "message": np.zeros(len(log["t_ns"]), np.uint8)}
        out: dict[str, Any] = {"cam_rx": deliveries, "v2x": log, **reacting}
        if load is not None:
            if "dcc_t_off_s" not in load:  # a model without DCC
                load = {**load, "dcc_t_off_s": np.full(len(load["t_ns"]), np.nan)}
            out["channel_load"] = load
        if self._triggers:
            out["cam_triggers"] = self.model.drain_triggers()
        if verdicts is not None:
            out["misbehaviour"] = verdicts
        return out

    def _with_platoon_fields(self, estimate: Mapping[str, np.ndarray], state: Mapping[str, np.ndarray] | None
                             ) -> Mapping[str, np.ndarray]:
        """The estimate with each sender's platoon fields (from the previous instant's ``platoon_state``, NaN for
        a robot not in it yet); the interest follows it."""
        if state is None or not len(state["id"]):
            return estimate
        self._follow_platoon_state(state)
        rows = rows_of(state["id"], estimate["id"], missing=-1)
        found = rows >= 0
        return {**estimate, **{name: np.where(found, np.asarray(state[name])[np.where(found, rows, 0)], np.nan)
                               for name in PLATOON_MESSAGE_FIELDS}}

    def finalize(self) -> None:
        if self.model is not None:
            self.model.finalize()

    def metrics(self) -> dict[str, Any]:
        """The channel model's own run-level figures (model facts for ``run.json``; metrics come from traces)."""
        return self.model.metrics() if self.model is not None else {}


_TX_RX = np.array([0, 1], np.uint8)  # codes into V2X_EVENTS
_SENT_RECEIVED = np.array([OUTCOMES.index("sent"), OUTCOMES.index("received")], np.uint8)
_CODES = {"event": {name: k for k, name in enumerate(V2X_EVENTS)}, "outcome": {n: k for k, n in enumerate(OUTCOMES)}}


def _as_codes(records: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A model's log with ``event`` and ``outcome`` as codes (a plug-in may log the names)."""
    for column, codes in _CODES.items():
        values = records[column]
        if values.dtype != np.uint8:
            records = {**records, column: np.fromiter((codes[str(v)] for v in values), np.uint8, len(values))}
    return records


def _log(deliveries: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The ``v2x`` rows of a model that logs nothing itself: one "sent" row per sender heard this step (at the
    generation time of the step's first delivery) and one "received" row per delivery."""
    rx_sender = deliveries["sender"]
    n_rx = len(rx_sender)
    senders = np.unique(rx_sender)
    n_tx = len(senders)
    tx_time = np.full(n_tx, deliveries["generated_ns"][0] if n_rx else 0, np.int64)
    return {
        "t_ns": np.concatenate([tx_time, deliveries["received_ns"]]),
        "event": np.repeat(_TX_RX, [n_tx, n_rx]),
        "sender": np.concatenate([senders, rx_sender]),
        "receiver": np.concatenate([np.full(n_tx, -1, np.int64), deliveries["receiver"]]),
        "generated_ns": np.concatenate([tx_time, deliveries["generated_ns"]]),
        "latency_s": np.concatenate([np.zeros(n_tx), (deliveries["received_ns"] - deliveries["generated_ns"]) / 1e9]),
        "rx_power_dbm": np.full(n_tx + n_rx, np.nan),
        "outcome": np.repeat(_SENT_RECEIVED, [n_tx, n_rx]),
    }
