"""The scenario's ``attacks`` and ``detection`` blocks (``docs/security-research.md``): misbehaving stations, and
the misbehaviour detector every receiving station runs with its reaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from core.params import Loc, Strict


class AttackEntry(Strict):
    """One attacker: the robot whose messages are forged, how, and when."""

    robot: str | None = Field(None, description="name of the attacking robot (a jammer at a fixed point, params "
                              "x_m and y_m, needs none)")
    type: str = Field(description="attack: a built-in (comms_models.attacks.ATTACKS), an entry point of "
                      "'coopsim.attacks' or a 'package.module:Class' path")
    params: dict[str, Any] = Field(default_factory=dict, description="the attack's parameters")
    from_s: float = Field(0.0, ge=0, le=1e6, description="[s] first generation time the attack forges")
    to_s: float | None = Field(None, gt=0, le=1e6, description="[s] the attack stops at this time (default: never)")

    @field_validator("type")
    @classmethod
    def _known_attack(cls, value: str) -> str:
        from comms_models.attacks import ATTACKS

        ATTACKS.resolve(value)
        return value

    @model_validator(mode="after")
    def _valid(self) -> AttackEntry:
        from comms_models.attacks import ATTACKS

        if self.to_s is not None and self.to_s <= self.from_s:
            raise ValueError(f"to_s ({self.to_s:g}) must be after from_s ({self.from_s:g})")
        cls = ATTACKS.get(self.type)
        params = cls.Params.model_validate(self.params)
        if self.robot is None and cls.needs_robot(params):
            raise ValueError(f"robot: attack '{self.type}' needs the name of the robot that sends it"
                             + (" (or, for a jammer, a fixed point: params x_m and y_m)"
                                if cls.message == "air" else ""))
        return self


class DetectionBlock(Strict):
    """The detector each receiving station runs, and what a follower does with a message judged misbehaving."""

    type: str = Field("plausibility", description="detector: a built-in (comms_models.misbehaviour.DETECTORS), an "
                      "entry point of 'coopsim.detectors' or a 'package.module:Class' path")
    params: dict[str, Any] = Field(default_factory=dict, description="the detector's parameters")
    reaction: Literal["none", "ignore", "fallback", "open_gap", "leave"] = Field(
        "none", description="none: only judge; ignore: drop misbehaving messages; fallback: stop listening to their "
        "sender for hold_s (a follower's controller.fallback then switches it to ACC on its range sensor); open_gap: "
        "a follower that judges its predecessor's or leader's messages misbehaving multiplies its desired gap (time "
        "gap and standstill distance) by gap_factor until hold_s after the last one; leave: it leaves its platoon "
        "(the leave maneuver: it opens a gap, changes lane and drives on alone)")
    hold_s: float = Field(1.0, gt=0, le=1e6, description="[s] fallback: how long a misbehaving sender is not heard; "
                          "open_gap: how long the gap stays open after the last misbehaving message")
    gap_factor: float = Field(2.0, gt=1, le=10, description="open_gap: factor on the time gap and standstill distance")
    gap_rate_mps: float = Field(1.0, gt=0, le=10, description="[m/s] open_gap: how fast the gap opens and closes")
    leave_lane_offset_m: float | None = Field(None, ge=-50, le=50, description="[m] leave: the lane offset the leaver "
                                              "changes to (default: two vehicle widths right of its lane)")

    @field_validator("type")
    @classmethod
    def _known_detector(cls, value: str) -> str:
        from comms_models.misbehaviour import DETECTORS

        DETECTORS.resolve(value)
        return value

    @model_validator(mode="after")
    def _valid(self) -> DetectionBlock:
        from comms_models.misbehaviour import DETECTORS

        DETECTORS.get(self.type).Params.model_validate(self.params)
        return self


def attack_problems(attacks: Sequence[AttackEntry], names: Sequence[str], channel_type: str
                    ) -> list[tuple[Loc, str, Any]]:
    """Attackers and replay targets that name no robot, and attacks on a channel model that cannot carry them."""
    from comms_models import COMMS_MODELS

    problems: list[tuple[Loc, str, Any]] = []
    known = set(names)
    for k, entry in enumerate(attacks):
        if entry.robot is not None and entry.robot not in known:
            problems.append((("attacks", k, "robot"), f"no robot named '{entry.robot}'", entry.robot))
        for key in ("target", "impersonate", "peer"):  # parameters that name a robot
            name = entry.params.get(key)
            if isinstance(name, str) and name not in known:
                problems.append((("attacks", k, "params", key), f"no robot named '{name}'", name))
    if attacks and not hasattr(COMMS_MODELS.get(channel_type), "attach_attacks"):
        problems.append((("channel", "type"), f"channel model '{channel_type}' carries no attacks (use itsg5)",
                         channel_type))
    return problems


def misbehaviour_config(attacks: Sequence[AttackEntry], detection: DetectionBlock | None,
                        ids_of: dict[str, int]) -> dict[str, Any] | None:
    """The V2X federate's ``misbehaviour`` parameter (plain data; None without attacks and detection)."""
    if not attacks and detection is None:
        return None
    return {
        "attacks": [{"robot": -1 if a.robot is None else ids_of[a.robot], "type": a.type, "params": dict(a.params),
                     "from_ns": round(a.from_s * 1e9), "to_ns": None if a.to_s is None else round(a.to_s * 1e9)}
                    for a in attacks],
        "names": dict(ids_of),
        "detection": None if detection is None else detection.model_dump(),
    }


def reaction_config(detection: DetectionBlock | None) -> dict[str, Any] | None:
    """The control federate's ``reactions`` parameter for the reactions it carries out (open_gap, leave), else
    None."""
    if detection is None or detection.reaction not in ("open_gap", "leave"):
        return None
    return {"reaction": detection.reaction, "hold_ns": round(detection.hold_s * 1e9),
            "gap_factor": detection.gap_factor, "gap_rate_mps": detection.gap_rate_mps,
            "lane_offset_m": detection.leave_lane_offset_m}
