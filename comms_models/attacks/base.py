"""The attack interface: one instance per scenario entry (one attacking station, one time window).

An attack sees the content of its station's messages in SI units and the local frame, as the facilities filled it
(``CAM_FIELDS`` for a CAM, ``u_des`` for a platooning message), and returns what the station sends instead. Every
random draw is keyed by (the attack's seeded purpose key, station, component, generation time), so the same seed
forges the same values whatever else the run holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from core.rng import KeyedDraws

CAM_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate")
"""What a forged CAM's content holds: position [m], heading [rad], speed [m/s], acceleration [m/s^2] and yaw rate
[rad/s], local ENU frame (the CA service converts to WGS84 and ETSI units after the attack). An attack also sees
``lf`` (bool: the CAM carries the low-frequency container) and may return it, and may return ``generated_ns``
(int64: the generation time the CAM claims, on the wire and in the trace; default the true one)."""

NEVER_NS = np.iinfo(np.int64).max


class AttackParams(BaseModel):
    """An attack's parameters (unknown keys are errors, every number finite)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


@dataclass(frozen=True)
class AttackContext:
    """Where an attack acts: its station (robot id), its ground-truth label (the entry's index in the scenario's
    ``attacks`` plus one; 0 marks honest messages), its window [from_ns, to_ns), the seeded key of its draws and the
    robots' ids by name (for attacks that name another robot)."""

    robot: int
    label: int
    from_ns: int
    to_ns: int
    key: np.uint64
    ids_of: Mapping[str, int]

    def active(self, t_ns: int) -> bool:
        """Whether the attack acts on messages generated at ``t_ns``."""
        return self.from_ns <= t_ns < self.to_ns


class Attack:
    """Base class of attacks. ``message`` names the messages it forges ("cam" or "pm"; "air" for a jammer, which
    forges none: ``jamming.Jamming``); ``extra_frames`` is True for an attack that adds frames of its own
    (``extra_due``) beside the station's regular ones."""

    Params: ClassVar[type[AttackParams]] = AttackParams
    message: ClassVar[Literal["cam", "pm", "air"]] = "cam"
    extra_frames: ClassVar[bool] = False
    only_extra: ClassVar[bool] = False
    """True when only the added frames are forged (a ghost's); the station's own frames stay honest."""
    pm_fields: ClassVar[tuple[str, ...]] = ("u_des",)
    """The platooning message fields a PM attack forges. ``("u_des",)``: the station's own desired acceleration,
    forged before the PM is filled (a leader's is then also the one it relays); anything else: ``forge`` gets and
    returns every field of the filled PM (``comms_models.itsg5.platooning.SI_KEYS``, SI)."""

    def __init__(self, params: AttackParams, ctx: AttackContext) -> None:
        self.params = params
        self.ctx = ctx

    @classmethod
    def needs_robot(cls, params: AttackParams) -> bool:
        """Whether the scenario entry must name the attacking robot (a fixed jammer needs none)."""
        return True

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The content the station sends instead of ``values`` (one row per message it generates at ``t_ns``); the
        default sends it unchanged (an attack on the rate only)."""
        return values

    def observe(self, t_ns: int, senders: np.ndarray, values: Mapping[str, np.ndarray]) -> None:
        """Every honest CAM content generated at ``t_ns`` (for an attack that records others' messages)."""

    def watched(self) -> int | None:
        """The station whose CAMs ``observe`` records (None: any station's): it is called only when that one
        sends."""
        return None

    def extra_due(self, t_ns: int) -> bool:
        """Whether the station sends an added frame at ``t_ns`` (``extra_frames`` attacks)."""
        return False

    def claimed_id(self) -> int | None:
        """The station id the forged frames claim (None: the attacker's own)."""
        return None

    def draws(self, t_ns: int, component: int, k: int) -> KeyedDraws:
        """Keyed draws for ``k`` messages of the attacker generated at ``t_ns`` (``component`` tells apart the
        values drawn for one message)."""
        return KeyedDraws(self.ctx.key, np.full(k, self.ctx.robot, np.int64), np.full(k, component, np.int64),
                          np.full(k, t_ns, np.int64))
