"""Graceful degradation from CACC to ACC when the predecessor's V2X data goes stale.

Per follower, with a = age of the newest predecessor data at use [s] (inf, or NaN, when never received):

- CACC -> ACC when a > timeout_s;
- ACC -> CACC once a <= fresh_age_s (< timeout_s) has held for recover_hold_s.

The two thresholds and the hold time are the hysteresis: a link that delivers only now and then does not make
the mode chatter. In ACC the follower relies on its own range sensor with a larger time gap (controllers.acc),
with a braking floor that stops any closing short of ``brake_to_gap_m`` (controllers.collision_avoidance): the
ACC alone opens a CACC gap too slowly to survive a predecessor that brakes soon after the switch.
``FallbackPolicy`` keeps the modes, a switch log (time, row, from, to) and the time each row spent degraded;
``CaccWithFallback`` is a law: a CACC with ``Fallback`` behind it.

The degradation exists once, as ``Fallback``: the policy deciding the mode, and in ACC the command of
``controllers.acc.Acc`` on the robot's own range sensor, floored by the braking needed to stop any closing, and
capped by holding the speed the robot had when it degraded (a P loop with the ACC's cruise gain), so a degraded
follower whose sensor sees nothing never speeds up beyond it. A law with its own state is handed the
applied command (``Controller.hand_back``), so the return to CACC starts from it (bumpless). Both the control
pipeline's ``controller.fallback`` stage (``controllers.pipeline``) and the ``cacc_fallback`` law run it.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
from numba import njit
from pydantic import Field, model_validator

from .acc import Acc, AccParams
from .base import Arrays, ControllerParams
from .collision_avoidance import required_deceleration
from .cruise import CruiseParams
from .longitudinal import LongitudinalController, as_f64
from .path_cacc import PathCacc, PathCaccParams
from .ploeg_cacc import PloegCacc, PloegCaccParams
from .rowstate import RowStateMixin

CACC, ACC = 0, 1
MODE_NAMES = ("cacc", "acc")


class FallbackParams(ControllerParams):
    """Thresholds of the CACC <-> ACC switch."""

    timeout_s: float = Field(0.5, gt=0, description="switch to ACC when the predecessor data is older [s]")
    fresh_age_s: float = Field(0.25, ge=0, description="data at most this old counts as fresh [s]")
    recover_hold_s: float = Field(0.2, ge=0, description="fresh data must last this long to return to CACC [s]")
    brake_to_gap_m: float | None = Field(
        0.3, ge=0, description="while degraded, brake at least as hard as needed to stop the closing at this "
        "bumper gap (controllers.collision_avoidance); null: the ACC alone [m]"
    )

    @model_validator(mode="after")
    def _check_hysteresis(self) -> FallbackParams:
        if self.fresh_age_s >= self.timeout_s:
            raise ValueError(f"fresh_age_s ({self.fresh_age_s}) must be below timeout_s ({self.timeout_s})")
        return self


class Switch(NamedTuple):
    """One mode change: at ``time_s`` row ``row`` went from mode ``from_mode`` to ``to_mode``."""

    time_s: float
    row: int
    from_mode: str
    to_mode: str


@njit(cache=True)
def fallback_kernel(age, dt, timeout, fresh_age, hold, mode, fresh_for, degraded_s, switched):  # pragma: no cover
    """Advances each row's mode by one step; ``switched`` marks the rows that changed."""
    for j in range(age.shape[0]):
        a = age[j] if np.isfinite(age[j]) else np.inf  # NaN: never received
        fresh_for[j] = fresh_for[j] + dt if a <= fresh_age else 0.0
        old = mode[j]
        if old == 0 and a > timeout:
            mode[j] = 1
        elif old == 1 and a <= fresh_age and fresh_for[j] >= hold:
            mode[j] = 0
        switched[j] = mode[j] != old
        if mode[j] == 1:
            degraded_s[j] += dt


class FallbackPolicy(RowStateMixin):
    """Per-row CACC/ACC mode with hysteresis (module docstring); rows start in CACC.

    ``update(t_s, age_s, dt)`` returns the modes (0 = CACC, 1 = ACC) for the step that starts at ``t_s``;
    ``switches`` is the log, ``degraded_time_s`` the time each row has spent in ACC [s]. Rows join and
    leave with ``add_rows`` / ``remove_rows`` (``RowStateMixin``); the log keeps the row numbers of its time.
    """

    def __init__(self, params: FallbackParams) -> None:
        self.params = params
        self._declare_state("mode", fill=CACC, dtype=np.int8)
        self._declare_state("fresh_for", fill=0.0)
        self._declare_state("degraded_s", fill=0.0)
        self.switches: list[Switch] = []

    def update(self, t_s: float, age_s: np.ndarray, dt: float) -> np.ndarray:
        """Modes after seeing the data age ``age_s`` [s] at time ``t_s`` [s]; dt [s] is the step length."""
        age = as_f64(age_s)
        self._ensure_rows(age.shape[0])
        st = self._state
        p = self.params
        switched = np.zeros(age.shape[0], dtype=np.bool_)
        before = st["mode"].copy()
        fallback_kernel(
            age, dt, p.timeout_s, p.fresh_age_s, p.recover_hold_s, st["mode"], st["fresh_for"],
            st["degraded_s"], switched,
        )
        for row in np.flatnonzero(switched):
            self.switches.append(
                Switch(float(t_s), int(row), MODE_NAMES[before[row]], MODE_NAMES[st["mode"][row]])
            )
        return st["mode"].copy()

    def braking_floor(self, accel: np.ndarray, sensors: Arrays) -> np.ndarray:
        """``accel`` with the collision-avoidance floor applied (``brake_to_gap_m``; unchanged when it is None or
        there is no range sensor)."""
        stop_gap = self.params.brake_to_gap_m
        if stop_gap is None or "gap_m" not in sensors or "gap_rate_mps" not in sensors:
            return accel
        needed = required_deceleration(sensors["gap_m"], sensors["gap_rate_mps"], stop_gap)
        return np.where(needed < 0.0, np.minimum(accel, needed), accel)  # 0: not closing, no bound

    @property
    def mode(self) -> np.ndarray:
        """Current mode per row (0 = CACC, 1 = ACC)."""
        return self._state["mode"].copy()

    @property
    def degraded_time_s(self) -> np.ndarray:
        """Time each row has spent in ACC [s]."""
        return self._state["degraded_s"].copy()


class Fallback(RowStateMixin):
    """The CACC -> ACC degradation of a group of followers (module docstring), vectorised over its rows.

    ``apply`` takes the command of the law in front of it and returns, per row, the command to apply and the
    mode. Rows join and leave with ``add_rows`` / ``remove_rows``; a fallback that never held rows sizes itself
    on its first ``apply``.
    """

    def __init__(self, policy: FallbackParams, acc: AccParams) -> None:
        self.policy = FallbackPolicy(policy)
        self.acc = Acc(acc)
        self._declare_state("hold_speed", fill=np.nan)  # [m/s] speed when the row degraded; NaN while in CACC

    def add_rows(self, n: int) -> None:
        """n new followers at the end, in CACC."""
        super().add_rows(n)
        self.policy.add_rows(n)

    def remove_rows(self, rows: np.ndarray) -> None:
        """Drops ``rows`` (indices in the current numbering) from the policy and the speed hold."""
        super().remove_rows(rows)
        self.policy.remove_rows(rows)

    def apply(
        self, t_s: float, age_s: np.ndarray, ego: Arrays, pred: Arrays, sensors: Arrays, dt: float,
        accel: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(command [m/s^2], mode) per row after seeing the predecessor data age ``age_s`` [s] at ``t_s`` [s]:
        ``accel`` where the row is in CACC, in ACC min(ACC with the braking floor, Kp (v_hold - v))."""
        age = as_f64(age_s)
        self._ensure_rows(age.shape[0])  # sizes the policy too (add_rows)
        mode = self.policy.update(t_s, age, dt)
        degraded = mode == ACC
        v = as_f64(ego["v"])
        hold = self._state["hold_speed"]
        hold = np.where(degraded & np.isnan(hold), v, hold)
        self._state["hold_speed"] = hold = np.where(degraded, hold, np.nan)
        out = np.array(accel, dtype=float)
        if degraded.any():
            u_acc = self.policy.braking_floor(self.acc.compute(ego, pred, {}, sensors, dt)["accel"], sensors)
            u_hold = self.acc.params.cruise.kp * (np.nan_to_num(hold) - v)  # type: ignore[attr-defined]
            out[degraded] = np.minimum(u_acc, u_hold)[degraded]
        return out, mode

    @property
    def mode(self) -> np.ndarray:
        """Current mode per row (0 = CACC, 1 = ACC)."""
        return self.policy.mode


def _fallback_acc() -> AccParams:
    # a set speed above the platoon's so that min(CC, ACC) does not cap a degraded follower at cruise speed
    return AccParams(cruise=CruiseParams(desired_speed_mps=130 / 3.6))


class CaccWithFallbackParams(ControllerParams):
    """Which CACC, its parameters, the ACC used when degraded, and the switch thresholds."""

    cacc: Literal["ploeg_cacc", "path_cacc"] = Field("ploeg_cacc", description="the CACC law in normal mode")
    ploeg: PloegCaccParams = Field(default_factory=PloegCaccParams, description="used when cacc = ploeg_cacc")
    path: PathCaccParams = Field(default_factory=PathCaccParams, description="used when cacc = path_cacc")
    acc: AccParams = Field(
        default_factory=_fallback_acc, description="ACC on the range sensor (T = 1.5 s; CC at 130 km/h)"
    )
    policy: FallbackParams = Field(default_factory=FallbackParams, description="CACC <-> ACC thresholds")


class CaccWithFallback(LongitudinalController):
    """CACC that degrades to ACC per follower when the predecessor's data is older than the timeout.

    Age of the predecessor data: ``pred["age_s"]`` [s] (NaN or inf: never received); without that column a
    row counts as fresh when ``pred["v"]`` is finite, else as never received. The CACC law runs every step and
    ``Fallback`` (module docstring) decides and acts behind it; while a row is in ACC the CACC law is handed the
    applied command, so the return to CACC starts from it (bumpless). ``compute`` returns ``accel`` [m/s^2],
    ``mode`` (0 = CACC, 1 = ACC) and ``degraded`` (the CACC law reported missing inputs, or the row is in ACC).
    The switch log's time is the sum of the dt passed to ``compute`` since construction.
    """

    Params = CaccWithFallbackParams

    def __init__(self, params: CaccWithFallbackParams) -> None:
        super().__init__(params)
        self.cacc_law: PloegCacc | PathCacc = (
            PloegCacc(params.ploeg) if params.cacc == "ploeg_cacc" else PathCacc(params.path)
        )
        self.fallback = Fallback(params.policy, params.acc)
        self._t_s = 0.0

    @property
    def policy(self) -> FallbackPolicy:
        """The CACC <-> ACC mode switch."""
        return self.fallback.policy

    @property
    def acc_law(self) -> Acc:
        """The ACC acting while degraded."""
        return self.fallback.acc

    def add_rows(self, n: int) -> None:
        """n new followers at the end, in CACC (see ``RowStateMixin``)."""
        self.fallback.add_rows(n)
        if isinstance(self.cacc_law, RowStateMixin):
            self.cacc_law.add_rows(n)

    def remove_rows(self, rows: np.ndarray) -> None:
        """Drops ``rows`` from the fallback and the CACC law's state (see ``RowStateMixin``)."""
        self.fallback.remove_rows(rows)
        if isinstance(self.cacc_law, RowStateMixin):
            self.cacc_law.remove_rows(rows)

    @property
    def switches(self) -> list[Switch]:
        """The switch log (time [s], row, from, to)."""
        return self.policy.switches

    @property
    def degraded_time_s(self) -> np.ndarray:
        """Time each row has spent in ACC [s]."""
        return self.policy.degraded_time_s

    def compute(
        self, ego: Arrays, pred: Arrays, leader: Arrays, sensors: Arrays, dt: float
    ) -> dict[str, np.ndarray]:
        """Per row: the CACC command in CACC mode, the fallback's ACC command in ACC mode."""
        n = len(ego["v"])
        have = np.isfinite(as_f64(pred["v"]))
        age = as_f64(pred["age_s"]) if "age_s" in pred else np.where(have, 0.0, np.inf)
        cacc_out = self.cacc_law.compute(ego, pred, leader, sensors, dt)
        accel, mode = self.fallback.apply(self._t_s, age, ego, pred, sensors, dt, cacc_out["accel"])
        self._t_s += dt
        degraded_mode = mode == ACC
        if degraded_mode.any():
            self.cacc_law.hand_back(degraded_mode, accel[degraded_mode])
        flagged = cacc_out.get("degraded", np.zeros(n, dtype=bool))
        return {"accel": accel, "mode": mode, "degraded": degraded_mode | flagged}

    def desired_gap(self, v: np.ndarray, curvature: np.ndarray | None = None) -> np.ndarray:
        """Bumper-to-bumper gap of each row's current law (the CACC's when the row count differs)."""
        v = np.asarray(v, dtype=float)
        gap_cacc = self.cacc_law.desired_gap(v, curvature)
        mode = self.policy.mode
        if mode.shape != v.shape:
            return gap_cacc
        return np.where(mode == ACC, self.acc_law.desired_gap(v, curvature), gap_cacc)
