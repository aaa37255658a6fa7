"""Platooning attacks on the desired acceleration a platooning message carries (the feed-forward term of CACC laws):
van der Heijden, Lukaseder and Kargl (VNC 2017) found falsified acceleration of the predecessor or leader the most
effective attack on feed-forward laws; Dadras, Gerdes and Sharma (AsiaCCS 2015) showed that an insider varying it
periodically, at the frequency where the string amplifies most, destabilises a platoon. Amoozadeh et al. (IEEE
Commun. Mag. 2015) add the attacks on the platoon's management: a station that claims to lead, or impersonates the
leader, and forged maneuver requests (join, leave, split, merge) a station is not entitled to send."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from core.ports import MANEUVER_STATES

from .base import Attack, AttackContext, AttackParams

PLATOON_ID_MAX = 4_294_967_294  # the PM's PlatoonId (4294967295: unavailable)


class ConstantDesiredAccelParams(AttackParams):
    u_mps2: float = Field(2.0, ge=-20, le=20, description="[m/s^2] the desired acceleration every PM reports")


class ConstantDesiredAccel(Attack):
    """Every platooning message reports the same desired acceleration."""

    Params = ConstantDesiredAccelParams
    message = "pm"

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"u_des": np.full_like(values["u_des"], self.params.u_mps2)}  # type: ignore[attr-defined]


class SinusoidalDesiredAccelParams(AttackParams):
    amplitude_mps2: float = Field(1.0, gt=0, le=20, description="[m/s^2] amplitude of the reported sinusoid")
    frequency_hz: float = Field(0.2, gt=0, le=50, description="[Hz] its frequency (pick the platoon's most "
                                "amplified one)")
    offset_mps2: float = Field(0.0, ge=-20, le=20, description="[m/s^2] added to it")
    add_to_true: bool = Field(False, description="add the sinusoid to the true desired acceleration instead of "
                              "replacing it")


class SinusoidalDesiredAccel(Attack):
    """The reported desired acceleration is offset + amplitude sin(2 pi f (t - start))."""

    Params = SinusoidalDesiredAccelParams
    message = "pm"

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self.params
        tau = (t_ns - self.ctx.from_ns) / 1e9
        wave = p.offset_mps2 + p.amplitude_mps2 * math.sin(2.0 * math.pi * p.frequency_hz * tau)  # type: ignore
        base = np.nan_to_num(values["u_des"]) if p.add_to_true else 0.0  # type: ignore[attr-defined]
        return {"u_des": base + np.full_like(values["u_des"], wave)}


class ForgedLeaderParams(AttackParams):
    platoon_id: int | None = Field(None, ge=0, le=PLATOON_ID_MAX, description="the platoon it claims to lead "
                                   "(default: its own, as its platooning messages say)")
    impersonate: str | None = Field(None, description="name of the robot (the platoon's true leader) whose station "
                                    "id the messages claim (default: the attacker's own id)")
    u_leader_mps2: float | None = Field(None, ge=-16, le=16, description="[m/s^2] the leader's desired "
                                        "acceleration its messages report (default: its own, as a leader's)")


class ForgedLeader(Attack):
    """A station claims in its platooning messages to lead a platoon: position in platoon 0 (the leader), the
    leader's desired acceleration equal to its own (or ``u_leader_mps2``), optionally under the true leader's station
    id (``impersonate``: the messages forge the leader's state; its followers take them for the leader's)."""

    Params = ForgedLeaderParams
    message = "pm"
    pm_fields = ("platoon_id", "platoon_index", "u_leader", "u_des")

    def __init__(self, params: ForgedLeaderParams, ctx: AttackContext) -> None:
        super().__init__(params, ctx)
        self.as_id: int | None = None
        if params.impersonate is not None:
            if params.impersonate not in ctx.ids_of:
                raise ValueError(f"forged_leader: no robot named '{params.impersonate}'")
            self.as_id = int(ctx.ids_of[params.impersonate])

    def claimed_id(self) -> int | None:
        return self.as_id

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        p, k = self.params, len(values["u_des"])
        out = {**values, "platoon_index": np.zeros(k)}
        if p.platoon_id is not None:  # type: ignore[attr-defined]
            out["platoon_id"] = np.full(k, float(p.platoon_id))  # type: ignore[attr-defined]
        if p.u_leader_mps2 is None:  # type: ignore[attr-defined]
            out["u_leader"] = values["u_des"].copy()  # a leader relays its own
        else:
            out["u_leader"] = np.full(k, p.u_leader_mps2)  # type: ignore[attr-defined]
            if self.as_id is not None:  # the leader's own desired acceleration is the one it relays
                out["u_des"] = out["u_leader"].copy()
        return out


MANEUVER_REQUESTS = {"join": "join_request", "leave": "leave_request", "split": "split_request",
                     "merge": "merge_request"}
"""The maneuver state a forged request puts in the PM's maneuverState (``core.ports.MANEUVER_STATES``)."""


class ForgedManeuverParams(AttackParams):
    request: Literal["join", "leave", "split", "merge"] = Field("join", description="the maneuver requested")
    peer: str = Field(description="name of the robot the request is addressed to (maneuverPeer: a platoon's leader "
                      "for join, leave and merge; the member to become a leader for split)")
    platoon_id: int | None = Field(None, ge=0, le=PLATOON_ID_MAX, description="the platoon the messages name "
                                   "(default: the station's own)")
    platoon_index: int | None = Field(None, ge=0, le=254, description="the position they name, e.g. where a "
                                      "forged join wants in (default: the station's own)")


class ForgedManeuver(Attack):
    """Maneuver requests the station is not entitled to send: its platooning messages carry ``request``'s
    maneuver state addressed to ``peer`` (maneuverState, maneuverPeer; the maneuver machine's messages,
    ``controllers.maneuvers``), e.g. a split request from a follower, which only the leader may send."""

    Params = ForgedManeuverParams
    message = "pm"
    pm_fields = ("maneuver", "maneuver_peer", "platoon_id", "platoon_index")

    def __init__(self, params: ForgedManeuverParams, ctx: AttackContext) -> None:
        super().__init__(params, ctx)
        if params.peer not in ctx.ids_of:
            raise ValueError(f"forged_maneuver: no robot named '{params.peer}'")
        self.peer = int(ctx.ids_of[params.peer])
        self.state = MANEUVER_STATES.index(MANEUVER_REQUESTS[params.request])

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        p, k = self.params, len(values["maneuver"])
        out = {**values, "maneuver": np.full(k, float(self.state)), "maneuver_peer": np.full(k, float(self.peer))}
        if p.platoon_id is not None:  # type: ignore[attr-defined]
            out["platoon_id"] = np.full(k, float(p.platoon_id))  # type: ignore[attr-defined]
        if p.platoon_index is not None:  # type: ignore[attr-defined]
            out["platoon_index"] = np.full(k, float(p.platoon_index))  # type: ignore[attr-defined]
        return out
