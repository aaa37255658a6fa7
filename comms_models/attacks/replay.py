"""Data replay (Kamel et al., ICC 2020): the attacker sends, under its own station id and with a fresh generation
time, the content of a target station's CAM as it heard it. On the wire the replayed CAM equals the target's in
every field of its basic and high-frequency containers but the station id and the generation time."""

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
