"""String-stability criteria of a sweep: which signal's amplification along the platoon decides, in which norm.

A platoon is string stable when disturbances do not grow along it. The literature measures that on different
signals and norms (Feng et al., Annual Reviews in Control 47, 2019, give the definitions side by side): the L2 or
L-infinity gain from predecessor to follower of the spacing error, the speed or the acceleration, or |Gamma(jw)|
at chosen frequencies. They agree only when the leader excites what they measure: a leader at constant speed
excites no longitudinal dynamics, and the spacing-error ratio then measures how curves couple into the gap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .args import CHOICES, GAMMA, NORMS, QUANTITIES


@dataclass(frozen=True)
class Criterion:
    """One string-stability criterion: the worst follower's ratio of ``metric`` (follower over predecessor)."""

    quantity: str
    norm: str

    @property
    def metric(self) -> str:
        """The follower metric of ``metrics.json`` that is compared with 1."""
        return "gamma_speed" if self.quantity == GAMMA else f"{self.norm}_ratio_{QUANTITIES[self.quantity]}"

    @property
    def name(self) -> str:
        return GAMMA if self.quantity == GAMMA else f"{self.quantity}:{self.norm}"

    def describe(self, tolerance: float) -> str:
        """The rule in words, as the pages and the terminal print it."""
        if self.quantity == GAMMA:
            what = "|Gamma(jw)| of speed at the sinusoid leader's frequency"
        else:
            norm = "L2" if self.norm == "l2" else "L-infinity"
            what = f"{norm} ratio of {self.quantity.replace('_', ' ')}"
        return f"worst {self.metric} ({what}) <= {1 + tolerance:g} and no collision"


DEFAULT = Criterion("spacing_error", "l2")


def parse_criterion(text: str) -> Criterion:
    """``spacing_error``, ``speed`` or ``acceleration``, optionally ``:l2`` (default) or ``:linf``; or ``gamma``.
    Raises ValueError naming the allowed values."""
    quantity, _, norm = text.strip().partition(":")
    if quantity == GAMMA and not norm:
        return Criterion(GAMMA, "")
    norm = norm or "l2"
    if quantity not in QUANTITIES or norm not in NORMS:
        raise ValueError(f"--criterion: unknown criterion '{text}'; allowed: {', '.join(CHOICES)} (the norm "
                         "defaults to l2)")
    return Criterion(quantity, norm)


def excitation_note(leader: Mapping[str, Any] | None, criterion: Criterion) -> str:
    """Why the leader's profile does (or does not) excite the longitudinal dynamics the criterion measures."""
    profile = (leader or {}).get("profile", "s_curve")
    params = (leader or {}).get("params") or {}
    if profile == "sinusoid":
        note = (f"The leader's speed is a sinusoid ({params.get('frequency_hz', 0.2):g} Hz): every follower is "
                "excited at that frequency, so speed, acceleration and |Gamma| judge the longitudinal chain there. "
                "Sweep leader.params.frequency_hz to cover the frequencies where |Gamma| peaks.")
    elif profile in ("braking", "circle_speed_change"):
        note = (f"The leader's speed changes ({profile}): a broadband excitation of the longitudinal chain; L2 "
                "ratios of speed or acceleration judge it.")
    else:
        note = (f"The leader profile '{profile}' holds its speed: it does not excite the longitudinal dynamics. "
                "Spacing errors then come from curves and sensing (lateral coupling), and speed or acceleration "
                "ratios compare near-zero signals. For longitudinal string stability use a sinusoid or braking "
                "leader.")
    if criterion.quantity == GAMMA and profile != "sinusoid":
        note += " |Gamma| needs a sinusoid leader: no point can be judged."
    return note


def edge_note(group: Mapping[str, Any], swept: list[Any]) -> str | None:
    """A warning when the answer sits at the edge of the swept values (the grid does not bracket it)."""
    numbers = sorted(v for v in swept if isinstance(v, int | float) and not isinstance(v, bool))
    if not numbers:
        return None
    if group.get("value") is None:
        if group.get("unstable"):
            return f"no swept value is stable: extend the grid above {numbers[-1]:g}"
        return None
    if group["value"] == numbers[0]:
        return (f"the smallest swept value {numbers[0]:g} is already stable: the answer may lie lower; extend the "
                "grid below it")
    return None


__all__ = ["CHOICES", "DEFAULT", "GAMMA", "Criterion", "edge_note", "excitation_note", "parse_criterion"]
