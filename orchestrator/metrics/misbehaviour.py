"""Misbehaviour detection scored against the ground truth (``trace/misbehaviour.parquet``): per attack, the
precision, recall and F1 of the receivers' verdicts and the time from the attack's start to its first detected
message; over the honest messages, the false-positive rate (``misbehaviour``); per follower as a receiver, what its
detector missed and flagged wrongly (``detection``, which sweeps and comparisons take as any follower metric)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from comms_models.attacks import ATTACKS
from comms_models.misbehaviour.checks import CHECKS

from .follower import FollowerView
from .registry import follower_metric, run_metric
from .rundata import RunData


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def _on_air(kind: str) -> bool:
    """Whether attack type ``kind`` acts on the air (a jammer: it sends no message to score)."""
    try:
        return ATTACKS.get(kind).message == "air"
    except Exception:  # a plug-in that no longer loads: score it like any attack
        return False


@run_metric("misbehaviour", section="misbehaviour")
def misbehaviour(run: RunData, followers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """Detection quality per attack (precision over the attack's and the honest messages, recall, F1, time to
    detection) and the false-positive rate of the honest messages, with the honest messages each check failed (None
    without a detector's trace). Jammers are left out of ``attacks`` (they forge no message; ``attack`` is each
    entry's index in the scenario's list)."""
    verdicts = run.trace("misbehaviour")
    if verdicts is None:
        return None
    attack = np.asarray(verdicts["attack"], np.int64)
    flagged = np.asarray(verdicts["verdict"]) == "misbehaving"
    t_s = np.asarray(verdicts["t_ns"], np.int64) / 1e9
    honest = attack == 0
    false_pos = int(np.count_nonzero(flagged & honest))
    failed = np.asarray(verdicts["checks"], np.int64)[honest]
    by_check = {name: int(np.count_nonzero((failed >> k) & 1)) for k, name in enumerate(CHECKS)}
    entries = []
    for k, entry in enumerate(getattr(run.scenario, "attacks", None) or []):
        if _on_air(entry.type):
            continue
        mine = attack == k + 1
        tp, fn = int(np.count_nonzero(flagged & mine)), int(np.count_nonzero(~flagged & mine))
        precision, recall = _ratio(tp, tp + false_pos), _ratio(tp, tp + fn)
        f1 = 2 * precision * recall / (precision + recall) if precision and recall else None
        first = t_s[flagged & mine]
        entries.append({"attack": k, "type": entry.type, "robot": entry.robot, "messages": tp + fn,
                        "detected": tp, "precision": precision, "recall": recall, "f1": f1,
                        "time_to_detection_s": float(first.min() - entry.from_s) if len(first) else None})
    return {"messages": len(attack), "honest_messages": int(np.count_nonzero(honest)), "false_positives": false_pos,
            "false_positive_rate": _ratio(false_pos, int(np.count_nonzero(honest))),
            "false_positives_by_check": {name: count for name, count in by_check.items() if count},
            "attacks": entries}


@follower_metric("detection", report=("forged_missed", "false_alarms"))
def detection(f: FollowerView) -> dict[str, Any] | None:
    """This follower as a receiver (runs with a detector's trace only): the forged messages delivered to it, those
    its detector missed, the honest ones it flagged, and the time from the first attack whose messages reached it
    to its first detection (a worst follower for sweeps: more missed, more false alarms, later is worse)."""
    verdicts = f.run.trace("misbehaviour")
    if verdicts is None:
        return None  # no detector in this run: nothing to add
    mine = np.asarray(verdicts["receiver"], np.int64) == f.robot.id
    attack = np.asarray(verdicts["attack"], np.int64)[mine]
    flagged = (np.asarray(verdicts["verdict"]) == "misbehaving")[mine]
    forged = attack > 0
    entries = getattr(f.run.scenario, "attacks", None) or []
    starts = np.array([entries[k - 1].from_s if 0 < k <= len(entries) else np.nan for k in attack[forged]])
    caught = np.asarray(verdicts["t_ns"], np.int64)[mine][forged & flagged] / 1e9
    return {"forged_received": int(forged.sum()), "forged_missed": int((forged & ~flagged).sum()),
            "false_alarms": int((~forged & flagged).sum()),
            "time_to_detection_s": float(caught.min() - np.nanmin(starts)) if len(caught) else None}
