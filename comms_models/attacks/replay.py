"""Data replay and delayed messages (Kamel et al., ICC 2020). A data replay: the attacker sends, under its own
station id and with a fresh generation time, the content of a target station's CAM as it heard it; on the wire the
replayed CAM equals the target's, containers included, but for the station id and the generation time. A delayed
message: the station sends its own content of some time before."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

import numpy as np
from pydantic import Field

from .base import Attack, AttackContext, AttackParams


class DataReplayParams(AttackParams):
    target: str = Field(description="name of the robot whose CAMs are replayed")
    delay_s: float = Field(0.0, ge=0, le=3600, description="[s] replay the newest CAM of the target generated at "
                           "least this long before (0: the newest one)")


class DataReplay(Attack):
    """Every CAM of the attacker carries the content of the target's newest CAM at least ``delay_s`` old (its own
    until the target has sent one that old)."""

    Params = DataReplayParams

    def __init__(self, params: DataReplayParams, ctx: AttackContext) -> None:
        super().__init__(params, ctx)
        if params.target not in ctx.ids_of:
            raise ValueError(f"data_replay: no robot named '{params.target}'")
        self.target = int(ctx.ids_of[params.target])
        self.delay_ns = round(params.delay_s * 1e9)
        self.heard: deque[tuple[int, dict[str, float]]] = deque()  # (generation time, content), oldest first

    def watched(self) -> int | None:
        return self.target

    def observe(self, t_ns: int, senders: np.ndarray, values: Mapping[str, np.ndarray]) -> None:
        if t_ns >= self.ctx.to_ns:
            return
        rows = np.flatnonzero(senders == self.target)
        if len(rows):
            self.heard.append((t_ns, {name: float(col[rows[0]]) for name, col in values.items()}))

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        newest = None
        while self.heard and self.heard[0][0] <= t_ns - self.delay_ns:
            newest = self.heard.popleft()
        if newest is not None:  # keep it: the next CAM may come before a newer one is old enough
            self.heard.appendleft(newest)
            return {name: np.full_like(col, newest[1][name]) for name, col in values.items()}
        return values


class DelayedMessageParams(AttackParams):
    delay_s: float = Field(1.0, gt=0, le=3600, description="[s] the CAMs carry the station's own content of this "
                           "long before")
    fresh_time: bool = Field(False, description="stamp the old content with the current generation time (true), or "
                             "send it with the generation time it had (false: generationDeltaTime, the trace's "
                             "generated_ns and the receivers' message age are those of delay_s before)")


class DelayedMessage(Attack):
    """The delayed-message attack (the VeReMi extension's "delayed messages", Kamel et al., ICC 2020): every CAM
    of the station carries the content of its own newest CAM at least ``delay_s`` old (its oldest one while it has
    not sent one that old), with that CAM's generation time or a fresh one. A receiver sees a vehicle that lags
    ``delay_s`` behind where it is, under a plausible track of its own."""

    Params = DelayedMessageParams

    def __init__(self, params: DelayedMessageParams, ctx: AttackContext) -> None:
        super().__init__(params, ctx)
        self.delay_ns = round(params.delay_s * 1e9)
        self.sent: deque[tuple[int, dict[str, float]]] = deque()  # its own true content, oldest first

    def watched(self) -> int | None:
        return self.ctx.robot

    def observe(self, t_ns: int, senders: np.ndarray, values: Mapping[str, np.ndarray]) -> None:
        if t_ns >= self.ctx.to_ns:
            return
        rows = np.flatnonzero(senders == self.ctx.robot)
        if len(rows):
            self.sent.append((t_ns, {name: float(col[rows[0]]) for name, col in values.items()}))

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        while len(self.sent) > 1 and self.sent[1][0] <= t_ns - self.delay_ns:
            self.sent.popleft()  # the front is the newest content at least delay_s old (or the oldest there is)
        gen, old = self.sent[0]
        out = {name: np.full_like(col, old[name]) for name, col in values.items() if name in old}
        if not self.params.fresh_time:  # type: ignore[attr-defined]
            out["generated_ns"] = np.full(len(values["x"]), gen, np.int64)
        return out
