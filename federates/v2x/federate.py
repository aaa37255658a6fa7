"""The V2X federate: hosts one channel model, a station per robot, and publishes every transmission and reception.

It reads what each vehicle believes about itself (``estimate``) and what its driver or controller asks of it
(``commands``, from the previous instant: ``accel`` is the desired acceleration a platooning message carries), and
publishes the receptions completed by now (``cam_rx``). The applications' interest (each follower's predecessor and
leader) comes from the robot specs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from comms_models import COMMS_MODELS
from comms_models.base import OUTCOMES, CommsModel, Interest
from orchestrator.core.federate import Federate, FederateMeta, Input, SetupContext
from orchestrator.core.ports import CAM_RX, CHANNEL_LOAD, COMMANDS, ESTIMATE, V2X_EVENTS, V2X_LOG, fields_of
from orchestrator.core.robots import RobotSpec, rows_of


class V2XFederate(Federate):
    """Steps its channel model every ``step_ns``. When the run records, it also publishes every transmission and
    reception (``v2x``) and the channel load (``channel_load``), which the recorder writes like any port."""

    def __init__(self, name: str, step_ns: int, channel: Mapping[str, Any], trace: bool = True) -> None:
        super().__init__(name)
        self.record = trace
        self.step_ns = step_ns
        self.channel_config = dict(channel)
        self.model: CommsModel | None = None
        self._pairs: dict[int, list[int]] = {}  # receiver id -> sender ids it listens to
        self._interest = Interest(np.empty(0, np.int64), np.empty(0, np.int64))

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
        outputs: tuple = (CAM_RX,)
        if self.record:
            models_load = type(self.model).drain_load is not CommsModel.drain_load
            outputs = (CAM_RX, V2X_LOG, CHANNEL_LOAD) if models_load else (CAM_RX, V2X_LOG)
        inputs = (Input("estimate", fields=ESTIMATE.fields),
                  Input("commands", delayed=True, optional=True, fields=fields_of(COMMANDS, ["accel"])))
        return FederateMeta(inputs=inputs, outputs=outputs, period_ns=self.step_ns)

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        assert self.model is not None
        self.model.spawn(robots)
        for spec in robots:
            self._pairs[spec.id] = sorted({s for s in (spec.predecessor, spec.leader) if s is not None})
        self._rebuild_interest()

    def despawn(self, robot_ids: Sequence[int]) -> None:
        assert self.model is not None
        self.model.despawn(robot_ids)
        for rid in robot_ids:
            self._pairs.pop(int(rid), None)
        self._rebuild_interest()

    def _rebuild_interest(self) -> None:
        receivers = [r for r, senders in self._pairs.items() for _ in senders]
        senders = [s for r_senders in self._pairs.values() for s in r_senders]
        self._interest = Interest(np.asarray(receivers, np.int64), np.asarray(senders, np.int64))

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> dict[str, Any]:
        assert self.model is not None
        estimate = inputs["estimate"]
        commands = inputs.get("commands")
        if self.model.carries_platooning_message and commands is not None and len(commands["id"]):
            # the senders' desired accelerations, in estimate rows (only for a model that sends them)
            rows = rows_of(commands["id"], estimate["id"], missing=-1)
            desired = np.where(rows >= 0, np.asarray(commands["accel"])[rows], np.nan)
            estimate = {**estimate, "u_des": desired}
        deliveries = self.model.step(t_ns, estimate, self._interest)
        if "u_des" not in deliveries:  # a model that carries no platooning message
            deliveries = {**deliveries, "u_des": np.full(len(deliveries["receiver"]), np.nan)}
        if not self.record:  # the model keeps no log then (keep_log): nothing to drain
            return {"cam_rx": deliveries}
        records = self.model.drain_records()
        load = self.model.drain_load()
        log = _as_codes(records) if records is not None else _log(deliveries)
        out: dict[str, Any] = {"cam_rx": deliveries, "v2x": log}
        if load is not None:
            out["channel_load"] = load
        return out

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
