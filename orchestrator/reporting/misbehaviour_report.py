"""The misbehaviour section of a run's report: per attack, how well the receivers' detector caught it (precision,
recall, F1, time to detection), the false alarms on honest messages (per check), and the platoon's state under it
(collisions, smallest gap and time to collision, largest spacing error, time in fallback), so that runs with and
without detection or with another reaction compare at a glance (``coopsim sweep --param detection.reaction=...``)."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from typing import Any

from ..metrics.worst import worst_over_followers

ATTACK_COLUMNS = ("type", "robot", "messages", "detected", "precision", "recall", "f1", "time_to_detection_s")
EFFECT = (("collisions", "collisions"), ("min_gap_m", "smallest gap [m]"), ("min_ttc_s", "smallest TTC [s]"),
          ("spacing_error_max_m", "largest spacing error [m]"), ("time_degraded_s", "longest time in fallback [s]"),
          ("forged_missed", "forged messages missed (worst receiver)"),
          ("false_alarms", "false alarms (worst receiver)"))


def misbehaviour_section(metrics: Mapping[str, Any], table: Callable[..., str]) -> str:
    """The section's HTML ('' without a detector's trace); ``table``: the report's table builder."""
    mb = metrics.get("misbehaviour")
    if not mb:
        return ""
    attacks = {f"attack {a['attack']}": {c: a.get(c) for c in ATTACK_COLUMNS} for a in mb.get("attacks", [])}
    parts = []
    if attacks:
        parts.append(table(attacks, list(ATTACK_COLUMNS), first="attack"))
    else:
        parts.append("<p>No attack in this run: every alarm is a false positive.</p>")
    by_check = ", ".join(f"{html.escape(k)} {v}" for k, v in (mb.get("false_positives_by_check") or {}).items())
    rate = mb.get("false_positive_rate")
    parts.append(f"<p>Honest messages: {mb.get('honest_messages')}, false positives: {mb.get('false_positives')}"
                 + ("" if rate is None else f" ({100 * rate:.3f} %)") + (f" ({by_check})" if by_check else "")
                 + ".</p>")
    followers = metrics.get("followers", {})
    effect = {label: {"value": worst_over_followers(followers, key)} for key, label in EFFECT}
    parts.append("<p>The platoon under it (worst follower):</p>" + table(effect, ["value"], first="measure"))
    return "".join(parts)
