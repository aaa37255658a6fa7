"""The V2X federate: hosts one channel model, a station per robot, and records every transmission and reception.

It reads what each vehicle believes about itself (``estimate``) and publishes the receptions completed by now
(``cam_rx``). The applications' interest (each follower's predecessor and leader) comes from the robot specs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from comms_models import COMMS_MODELS
from comms_models.base import OUTCOMES, CommsModel, Interest
from orchestrator.core.federate import Federate, FederateMeta, Input, SetupContext
from orchestrator.core.ports import CAM_RX, ESTIMATE
from orchestrator.core.robots import RobotSpec
from orchestrator.tables import ParquetAppender, categorical


class V2XFederate(Federate):
    """Steps its channel model every ``step_ns``; writes ``trace/v2x.parquet`` when the run records."""

    def __init__(self, name: str, step_ns: int, channel: Mapping[str, Any], trace: bool = True) -> None:
        super().__init__(name)
        self.record = trace
        self.step_ns = step_ns
        self.channel_config = dict(channel)
        self.model: CommsModel | None = None
        self._pairs: dict[int, list[int]] = {}  # receiver id -> sender ids it listens to
        self._interest = Interest(np.empty(0, np.int64), np.empty(0, np.int64))
        self._trace: ParquetAppender | None = None
        self._deliveries: list[Mapping[str, np.ndarray]] = []
        self._pending_rows = 0

    def setup(self, ctx: SetupContext) -> FederateMeta:
        params = dict(self.channel_config)
        kind = params.pop("type")
        self.model = COMMS_MODELS.get(kind)(params, ctx.seed, ctx.out_dir)
        if ctx.out_dir is not None and self.record:
            self._trace = ParquetAppender(Path(ctx.out_dir) / "trace" / "v2x.parquet")
        return FederateMeta(
            inputs=(Input("estimate", fields=ESTIMATE.fields),),
            outputs=(CAM_RX,),
            period_ns=self.step_ns,
        )

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
        deliveries = self.model.step(t_ns, inputs["estimate"], self._interest)
        if self._trace is not None:
            records = self.model.drain_records()
            if records is None:
                self._deliveries.append(deliveries)  # published values are immutable: keep the reference
                self._pending_rows += len(deliveries["receiver"])
                if self._pending_rows >= 262_144:
                    self._flush_deliveries()
            else:
                self._trace.append(records)
        return {"cam_rx": deliveries}

    def _flush_deliveries(self) -> None:
        """Trace rows for a model that records nothing itself: per step, one 'sent' row per sender heard and one
        'received' row per delivery."""
        if not self._deliveries:
            return
        chunks, self._deliveries, self._pending_rows = self._deliveries, [], 0
        rx = {k: np.concatenate([d[k] for d in chunks]) for k in ("sender", "receiver", "generated_ns", "received_ns")}
        senders = [np.unique(d["sender"]) for d in chunks]
        tx_sender = np.concatenate(senders)
        tx_time = np.concatenate([np.full(len(s), d["generated_ns"][0] if len(d["generated_ns"]) else 0, np.int64)
                                  for s, d in zip(senders, chunks, strict=True)])
        n_rx, n_tx = len(rx["receiver"]), len(tx_sender)
        self._trace.append({  # type: ignore[union-attr]
            "t_ns": np.concatenate([tx_time, rx["received_ns"]]),
            "event": categorical(np.repeat(np.array([0, 1], np.int8), [n_tx, n_rx]), ("tx", "rx")),
            "sender": np.concatenate([tx_sender, rx["sender"]]),
            "receiver": np.concatenate([np.full(n_tx, -1, np.int64), rx["receiver"]]),
            "generated_ns": np.concatenate([tx_time, rx["generated_ns"]]),
            "latency_s": np.concatenate([np.zeros(n_tx), (rx["received_ns"] - rx["generated_ns"]) / 1e9]),
            "rx_power_dbm": np.full(n_tx + n_rx, np.nan),
            "outcome": categorical(np.repeat(np.array([0, 1], np.int8), [n_tx, n_rx]), OUTCOMES),
        })

    def finalize(self) -> None:
        if self.model is not None:
            self.model.finalize()
        if self._trace is not None:
            self._flush_deliveries()
            self._trace.close()

    def metrics(self) -> dict[str, Any]:
        """The channel model's run-level metrics."""
        return self.model.metrics() if self.model is not None else {}
