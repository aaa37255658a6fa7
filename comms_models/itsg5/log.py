"""What the ITS-G5 model reports: every transmission and reception with its outcome, each station's channel busy
ratio per DCC window, and the counts behind ``metrics()``. Kept apart from the medium so the model's step reads as
physics only."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..base import OUTCOMES

_TX, _RX = np.uint8(0), np.uint8(1)  # codes of the log's "event" (``core.ports.V2X_EVENTS``)
_SENT, _DCC_DROPPED = np.uint8(OUTCOMES.index("sent")), np.uint8(OUTCOMES.index("dcc_dropped"))
_RECORD_COLUMNS = ("t_ns", "event", "sender", "receiver", "generated_ns", "latency_s", "rx_power_dbm", "outcome")
_RECORD_DTYPES = (np.int64, np.uint8, np.int64, np.int64, np.int64, np.float64, np.float64, np.uint8)


class ChannelLog:
    """Buffers rows until drained (once per channel step) and keeps run-level counts."""

    def __init__(self) -> None:
        self.keep = True  # False: counts only, no rows (a run that records nothing never drains them)
        self._records: list[dict[str, np.ndarray]] = []
        self._load: list[dict[str, np.ndarray]] = []
        self._triggers: list[dict[str, np.ndarray]] = []
        self._cbr_sum = 0.0
        self._cbr_count = 0
        self._cbr_max = 0.0
        self.counts = dict.fromkeys(OUTCOMES, 0)
        self.interest_counts = dict.fromkeys(OUTCOMES, 0)
        self.pm: dict[str, dict[str, int]] | None = None  # the platooning messages' share of the counts, when sent
        # the run's AttackPlan: rows then carry "attack", their ground truth, and "true_generated_ns", when the frame
        # was really generated ("generated_ns" is the time it claims: a delayed message's is older)
        self.attacks: Any = None
        # with jammers: station ids -> the label of the jammer holding each one's medium busy now (0: none); rows
        # then carry "jammer", the cause of a frame dropped before the air
        self.jammed_by: Any = None
        # With PMs, the rows get a "message" column (0 CAM, 1 PM: the v2x port's ``message``); without them the
        # V2X federate fills it with CAM.

    def window(self, t_ns: int, stations: np.ndarray, cbr: np.ndarray, t_off_ns: np.ndarray) -> None:
        """One closed CBR window: ``cbr`` per station row, NaN where a station did not measure the whole window;
        ``t_off_ns`` the DCC gap each station is left with."""
        has = ~np.isnan(cbr)
        measured = cbr[has]
        if len(measured):
            if self.keep:
                self._load.append({"t_ns": np.full(len(measured), t_ns, np.int64), "robot": stations[has],
                                   "cbr": measured, "dcc_t_off_s": np.asarray(t_off_ns)[has] / 1e9})
            self._cbr_sum += float(measured.sum())
            self._cbr_count += len(measured)
            self._cbr_max = max(self._cbr_max, float(measured.max()))

    def enable_pm(self) -> None:
        """Count the platooning messages apart (``pm`` masks of the calls below)."""
        self.pm = {"all": dict.fromkeys(OUTCOMES, 0), "interest": dict.fromkeys(OUTCOMES, 0)}

    def sent(self, start_ns: np.ndarray, senders: np.ndarray, generated_ns: np.ndarray,
             pm: np.ndarray | None = None, frames: np.ndarray | None = None) -> None:
        """Frames that started on air (``pm``: which are platooning messages; ``frames``: their serials, for the
        ground truth of a run with attacks)."""
        k = len(senders)
        self.counts["sent"] += k
        if self.pm is not None and pm is not None:
            self.pm["all"]["sent"] += int(np.count_nonzero(pm))
        if not self.keep:
            return
        truth: dict[str, np.ndarray] = {}
        if self.attacks is not None and frames is not None:  # the station id and time on the air, the attack
            true_gen = np.asarray(generated_ns, np.int64).copy()
            labels, senders, generated_ns = self.attacks.truth(frames, senders, generated_ns)
            truth = {"attack": labels, "true_generated_ns": true_gen}
        elif self.attacks is not None:
            truth = {"true_generated_ns": np.asarray(generated_ns, np.int64).copy()}
        self._records.append({
            "t_ns": start_ns.copy(),
            "event": np.full(k, _TX),
            "sender": senders.copy(),
            "receiver": np.full(k, -1, np.int64),
            "generated_ns": generated_ns.copy(),
            "latency_s": (start_ns - generated_ns) / 1e9,
            "rx_power_dbm": np.full(k, np.nan),
            "outcome": np.full(k, _SENT),
            **self._message(k, pm),
            **truth,
        })

    def dropped(self, t_ns: int, senders: np.ndarray, generated_ns: np.ndarray, pm: bool = False) -> None:
        """Frames discarded before the medium (DCC gatekeeper, or replaced by a newer one of their kind in the
        queue); ``pm``: they are platooning messages."""
        k = len(senders)
        self.counts["dcc_dropped"] += k
        if self.pm is not None and pm:
            self.pm["all"]["dcc_dropped"] += k
        if not self.keep:
            return
        self._records.append({
            "t_ns": np.full(k, t_ns, np.int64),
            "event": np.full(k, _TX),
            "sender": senders.astype(np.int64),
            "receiver": np.full(k, -1, np.int64),
            "generated_ns": np.asarray(generated_ns, np.int64),
            "latency_s": np.full(k, np.nan),
            "rx_power_dbm": np.full(k, np.nan),
            "outcome": np.full(k, _DCC_DROPPED),
            **self._message(k, pm),
            **({"attack": self.attacks.label_at(np.asarray(senders, np.int64), np.asarray(generated_ns, np.int64),
                                                pm), "true_generated_ns": np.asarray(generated_ns, np.int64)}
               if self.attacks is not None else {}),
            **({"jammer": self.jammed_by(np.asarray(senders, np.int64))} if self.jammed_by is not None else {}),
        })

    def receptions(self, code: np.ndarray, interest: np.ndarray, record: Any, t_rx: np.ndarray, sender: np.ndarray,
                   receiver: np.ndarray, generated_ns: np.ndarray, power_dbm: np.ndarray,
                   pm: np.ndarray | None = None, attack: np.ndarray | None = None,
                   true_generated_ns: np.ndarray | None = None) -> None:
        """Reception attempts with their outcome codes; the rows selected by ``record`` are logged (all columns but
        ``power_dbm`` are given for every attempt, ``power_dbm`` for the recorded ones only). ``pm``: which
        attempts are of platooning messages; ``attack``: their ground truth (runs with attacks), ``true_generated_ns``
        when each frame was really generated (``generated_ns``: the time it claims; the same when not given)."""
        for c, cnt in zip(*np.unique(code, return_counts=True), strict=True):
            self.counts[OUTCOMES[c]] += int(cnt)
        for c, cnt in zip(*np.unique(code[interest], return_counts=True), strict=True):
            self.interest_counts[OUTCOMES[c]] += int(cnt)
        if self.pm is not None and pm is not None:
            for scope, mask in (("all", pm), ("interest", pm & interest)):
                for c, cnt in enumerate(np.bincount(code[mask], minlength=len(OUTCOMES)).tolist()):
                    self.pm[scope][OUTCOMES[c]] += cnt
        if not self.keep:
            return
        gen = generated_ns[record]
        received = code[record] == OUTCOMES.index("received")
        self._records.append({
            "t_ns": t_rx[record],
            "event": np.full(len(gen), _RX),
            "sender": sender[record].copy(),
            "receiver": receiver[record],
            "generated_ns": gen.copy(),
            "latency_s": np.where(received, (t_rx[record] - gen) / 1e9, np.nan),
            "rx_power_dbm": power_dbm,
            "outcome": code[record].astype(np.uint8),
            **self._message(len(gen), None if pm is None else pm[record]),
            **({"attack": attack[record],
                "true_generated_ns": (generated_ns if true_generated_ns is None else true_generated_ns)[record].copy()}
               if attack is not None and self.attacks is not None else {}),
        })

    def _message(self, k: int, pm: np.ndarray | bool | None) -> dict[str, np.ndarray]:
        """The "message" column of ``k`` rows (only when PMs are sent)."""
        if self.pm is None:
            return {}
        return {"message": np.broadcast_to(np.asarray(bool(pm) if np.ndim(pm) == 0 else pm, np.uint8), (k,)).copy()}

    def drain_records(self) -> dict[str, np.ndarray]:
        """Rows logged since the last call (see ``CommsModel.drain_records``); with PMs also ``message``."""
        chunks, self._records = self._records, []
        columns, dtypes = _RECORD_COLUMNS, _RECORD_DTYPES
        if self.pm is not None:
            columns, dtypes = (*columns, "message"), (*dtypes, np.uint8)
        if self.attacks is not None:
            columns, dtypes = (*columns, "attack", "true_generated_ns"), (*dtypes, np.int64, np.int64)
            for c in chunks:  # a row logged before the plan was attached
                for name in ("attack", "true_generated_ns"):
                    if name not in c:
                        c[name] = c["generated_ns"].copy() if name == "true_generated_ns" else \
                            np.zeros(len(c["t_ns"]), np.int64)
        if self.jammed_by is not None:  # on dropped rows only: the others were not kept off the air
            columns, dtypes = (*columns, "jammer"), (*dtypes, np.int64)
            for c in chunks:
                if "jammer" not in c:
                    c["jammer"] = np.zeros(len(c["t_ns"]), np.int64)
        if not chunks:
            return {name: np.empty(0, dt) for name, dt in zip(columns, dtypes, strict=True)}
        return {name: np.concatenate([c[name] for c in chunks]) for name in columns}

    def drain_load(self) -> dict[str, np.ndarray]:
        """Each station's CBR per window since the last call (see ``CommsModel.drain_load``)."""
        chunks, self._load = self._load, []
        if not chunks:
            return {"t_ns": np.empty(0, np.int64), "robot": np.empty(0, np.int64), "cbr": np.empty(0),
                    "dcc_t_off_s": np.empty(0)}
        return {name: np.concatenate([c[name] for c in chunks]) for name in ("t_ns", "robot", "cbr", "dcc_t_off_s")}

    def triggers(self, t_ns: int, stations: np.ndarray, cause: np.ndarray) -> None:
        """CAMs generated at ``t_ns`` and why (codes into ``core.ports.CAM_TRIGGERS``)."""
        if self.keep and len(stations):
            self._triggers.append({"t_ns": np.full(len(stations), t_ns, np.int64), "robot": stations,
                                   "cause": cause.astype(np.uint8)})

    def drain_triggers(self) -> dict[str, np.ndarray]:
        """The generated CAMs since the last call, with their trigger."""
        chunks, self._triggers = self._triggers, []
        if not chunks:
            return {"t_ns": np.empty(0, np.int64), "robot": np.empty(0, np.int64), "cause": np.empty(0, np.uint8)}
        return {name: np.concatenate([c[name] for c in chunks]) for name in ("t_ns", "robot", "cause")}

    def summary(self) -> dict[str, Any]:
        """``cbr_mean`` / ``cbr_max`` over every station and window, frame counts, and the packet delivery ratio of
        the interest pairs."""
        pm = self.pm
        counts, ic = self.counts, self.interest_counts
        if pm is not None:  # the CAM figures without the platooning messages
            counts = {k: v - pm["all"][k] for k, v in counts.items()}
            ic = {k: v - pm["interest"][k] for k, v in ic.items()}
        out = {
            "cbr_mean": self._cbr_sum / self._cbr_count if self._cbr_count else 0.0,
            "cbr_max": self._cbr_max,
            "cams_sent": counts["sent"],
            "cams_dcc_dropped": counts["dcc_dropped"],
            **_outcomes(ic),
        }
        if pm is not None:
            pm_out = _outcomes(pm["interest"])
            out.update(pms_sent=pm["all"]["sent"], pms_dcc_dropped=pm["all"]["dcc_dropped"],
                       pm_interest_outcomes=pm_out["interest_outcomes"], pm_pdr_interest=pm_out["pdr_interest"])
        return out


def _outcomes(ic: dict[str, int]) -> dict[str, Any]:
    """Reception outcomes of the interest pairs and their packet delivery ratio."""
    attempts = sum(v for k, v in ic.items() if k not in ("sent", "dcc_dropped"))
    return {"interest_outcomes": {k: v for k, v in ic.items() if k not in ("sent", "dcc_dropped")},
            "pdr_interest": ic["received"] / attempts if attempts else math.nan}
