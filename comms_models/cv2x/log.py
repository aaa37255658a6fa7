"""What the C-V2X model reports: every transmission (with the resource it used and why it was chosen) and every
reception of the traced links (with its loss cause), each station's CBR per window, and the run's counts.

Rows have the columns of the ``v2x`` port and five more (``CV2X_COLUMNS``): the subframe, the first subchannel and
the number of subchannels of the transmission, why its resource was (re)selected (``RESELECTIONS``: "none" when it
used its reservation) and, on rx rows, the loss cause (``reception.LOSS_CAUSES``). The port's ``outcome`` stays
comparable with the other channels: a loss to sensing (below the sensing threshold) or to propagation (the transport
block failed at its SNR) is ``below_sensitivity``, a collision ``collision``, half-duplex ``half_duplex``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..base import OUTCOMES
from .reception import COLLISION, HALF_DUPLEX, LOSS_CAUSES, PROPAGATION, RECEIVED, SENSING

RESELECTIONS = ("none", "first", "counter", "size", "latency", "unused", "dynamic", "retransmission")
"""Why a transmission's resource was selected anew: not at all (its reservation), the station's first packet, the
reselection counter expired (and the keep draw said reselect), the packet did not fit the reservation, the
reservation came too late for the packet's delay budget, or it had not been used for a second; with NR dynamic
scheduling every packet's first copy is ``dynamic`` and its blind retransmissions ``retransmission``."""

_TX, _RX = np.uint8(0), np.uint8(1)
_OUTCOME_OF_CAUSE = np.zeros(len(LOSS_CAUSES), np.uint8)
_OUTCOME_OF_CAUSE[[RECEIVED, HALF_DUPLEX, SENSING, PROPAGATION, COLLISION]] = [
    OUTCOMES.index(name) for name in ("received", "half_duplex", "below_sensitivity", "below_sensitivity",
                                      "collision")]
V2X_COLUMNS = ("t_ns", "event", "sender", "receiver", "generated_ns", "latency_s", "rx_power_dbm", "outcome")
CV2X_COLUMNS = ("subframe", "subchannel", "subchannels", "reselection", "loss")
_DTYPES = dict(zip(V2X_COLUMNS + CV2X_COLUMNS, (np.int64, np.uint8, np.int64, np.int64, np.int64, np.float64,
                                                np.float64, np.uint8, np.int64, np.int64, np.int64, np.uint8,
                                                np.uint8), strict=True))


def outcome_codes(cause: np.ndarray) -> np.ndarray:
    """``v2x`` outcome codes (``comms_models.base.OUTCOMES``) of loss causes."""
    return _OUTCOME_OF_CAUSE[cause]


_TX_ROWS, _RX_ROWS, _DROP_ROWS = 0, 1, 2  # the kinds of a run of rows in the log's order


class Cv2xLog:
    """Buffers rows until drained and keeps run-level counts.

    Rows are kept by kind in columns (a tuple of arrays per subframe's transmissions, one block of reception rows per
    channel step, a dict per drop) with the order of their runs (``_order``: kind and row count); ``drain_records``
    puts them back in that order with one take per column. A subframe's receptions hold their place in the order
    (``hold_receptions``) until the step's receptions are logged in one call (``receptions``)."""

    def __init__(self) -> None:
        self.keep = True
        self.ns_slot = 1_000_000  # [ns] a subframe (NR: a slot; set by the sidelink)
        self._order: list[list[int]] = []  # [kind, rows] per run of rows
        self._tx: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._rx: list[dict[str, np.ndarray]] = []
        self._drop: list[dict[str, np.ndarray]] = []
        self._held: list[list[int]] = []  # the runs of the receptions held for the step's ``receptions``
        self._reselection_codes: list[np.ndarray] = []  # counted when the counts are read
        self._load: list[dict[str, np.ndarray]] = []
        self._triggers: list[dict[str, np.ndarray]] = []
        self.sent = 0
        self.replaced = 0
        self.too_big = 0
        self.cr_dropped = 0
        self._reselections = np.zeros(len(RESELECTIONS), np.int64)
        self.causes = dict.fromkeys(LOSS_CAUSES, 0)  # every link within the radius
        self.interest_causes = dict.fromkeys(LOSS_CAUSES, 0)
        self._cbr_sum, self._cbr_count, self._cbr_max = 0.0, 0, 0.0

    @property
    def reselections(self) -> dict[str, int]:
        """Transmissions by the cause their resource was selected anew (``RESELECTIONS`` but "none")."""
        if self._reselection_codes:
            codes = np.concatenate(self._reselection_codes)
            self._reselection_codes = []
            self._reselections += np.bincount(codes, minlength=len(RESELECTIONS))
        return {name: int(c) for name, c in zip(RESELECTIONS[1:], self._reselections[1:], strict=True)}

    def transmissions(self, sf: int, senders: np.ndarray, generated_ns: np.ndarray, x0: np.ndarray,
                      length: np.ndarray, reselection: np.ndarray) -> None:
        """Transmissions that started in subframe ``sf``, with their resources and reselection causes (the arrays
        are kept, not copied)."""
        k = len(senders)
        self.sent += k
        self._reselection_codes.append(reselection)
        if self.keep and k:
            self._order.append([_TX_ROWS, k])
            self._tx.append((sf, senders, generated_ns, x0, length, reselection))

    def dropped(self, t_ns: int, senders: np.ndarray, generated_ns: np.ndarray, cause: str = "replaced") -> None:
        """Messages that never went on air: ``replaced`` by a newer one before their resource came, ``too_big`` for
        the carrier, or dropped by congestion control (``cr_limit``: their transmission would have taken the
        station's CR over its limit). Logged as ``dcc_dropped``, as the ITS-G5 model logs a replaced CAM."""
        k = len(senders)
        if cause == "too_big":
            self.too_big += k
        elif cause == "cr_limit":
            self.cr_dropped += k
        else:
            self.replaced += k
        if self.keep and k:
            self._order.append([_DROP_ROWS, k])
            self._drop.append({
                "t_ns": np.full(k, t_ns, np.int64), "event": np.full(k, _TX), "sender": senders.copy(),
                "receiver": np.full(k, -1, np.int64), "generated_ns": np.asarray(generated_ns, np.int64).copy(),
                "latency_s": np.full(k, np.nan), "rx_power_dbm": np.full(k, np.nan),
                "outcome": np.full(k, OUTCOMES.index("dcc_dropped"), np.uint8),
                "subframe": np.full(k, -1, np.int64), "subchannel": np.full(k, -1, np.int64),
                "subchannels": np.zeros(k, np.int64), "reselection": np.zeros(k, np.uint8),
                "loss": np.zeros(k, np.uint8)})

    def hold_receptions(self) -> None:
        """The receptions of the subframe just transmitted come here in the order, logged later (``receptions``)."""
        if self.keep:
            run = [_RX_ROWS, 0]
            self._order.append(run)
            self._held.append(run)

    def receptions(self, cause: np.ndarray, interest: np.ndarray, record: np.ndarray, t_rx: np.ndarray,
                   sender: np.ndarray, receiver: np.ndarray, generated_ns: np.ndarray, power_dbm: np.ndarray,
                   sf: np.ndarray, x0: np.ndarray, length: np.ndarray, per_subframe: np.ndarray) -> None:
        """Reception attempts (every link of the held subframes, ``per_subframe`` links each, in order) with their
        loss causes (``sf``: the slot of each link's outcome); the rows of mask ``record`` are logged."""
        for scope, mask in ((self.causes, slice(None)), (self.interest_causes, interest)):
            for code, count in enumerate(np.bincount(cause[mask], minlength=len(LOSS_CAUSES)).tolist()):
                scope[LOSS_CAUSES[code]] += count
        held, self._held = self._held, []
        if not self.keep:
            return
        bounds = np.concatenate([[0], np.cumsum(per_subframe)])
        kept = np.concatenate([[0], np.cumsum(record)])[bounds]
        for run, rows in zip(held, np.diff(kept).tolist(), strict=True):
            run[1] = rows
        c = cause[record]
        k = len(c)
        if not k:
            return
        gen = generated_ns[record]
        ok = c == RECEIVED
        self._rx.append({
            "t_ns": t_rx[record], "event": np.full(k, _RX), "sender": sender[record], "receiver": receiver[record],
            "generated_ns": gen, "latency_s": np.where(ok, (t_rx[record] - gen) / 1e9, np.nan),
            "rx_power_dbm": power_dbm[record], "outcome": outcome_codes(c), "subframe": sf[record].astype(np.int64),
            "subchannel": x0[record], "subchannels": length[record], "reselection": np.zeros(k, np.uint8),
            "loss": c.astype(np.uint8)})

    def _tx_columns(self) -> dict[str, np.ndarray]:
        """The transmissions kept since the last drain as rows."""
        sf = np.concatenate([np.full(len(t[1]), t[0], np.int64) for t in self._tx])
        senders, gen, x0, length, reselection = (np.concatenate([t[i] for t in self._tx]) for i in range(1, 6))
        k = len(sf)
        t = sf * self.ns_slot
        return {"t_ns": t, "event": np.full(k, _TX), "sender": senders, "receiver": np.full(k, -1, np.int64),
                "generated_ns": gen, "latency_s": (t - gen) / 1e9, "rx_power_dbm": np.full(k, np.nan),
                "outcome": np.full(k, OUTCOMES.index("sent"), np.uint8), "subframe": sf, "subchannel": x0,
                "subchannels": length, "reselection": reselection.astype(np.uint8), "loss": np.zeros(k, np.uint8)}

    def window(self, t_ns: int, stations: np.ndarray, cbr: np.ndarray) -> None:
        """A closed CBR window: ``cbr`` per station, NaN where a station did not measure all of it."""
        has = ~np.isnan(cbr)
        measured = cbr[has]
        if not len(measured):
            return
        if self.keep:
            self._load.append({"t_ns": np.full(len(measured), t_ns, np.int64), "robot": stations[has].copy(),
                               "cbr": measured})
        self._cbr_sum += float(measured.sum())
        self._cbr_count += len(measured)
        self._cbr_max = max(self._cbr_max, float(measured.max()))

    def triggers(self, t_ns: int, stations: np.ndarray, cause: np.ndarray) -> None:
        """CAMs generated at ``t_ns`` and why (codes into ``core.ports.CAM_TRIGGERS``)."""
        if self.keep and len(stations):
            self._triggers.append({"t_ns": np.full(len(stations), t_ns, np.int64), "robot": stations.copy(),
                                   "cause": cause.astype(np.uint8)})

    def drain_triggers(self) -> dict[str, np.ndarray]:
        """The generated CAMs since the last call, with their trigger."""
        chunks, self._triggers = self._triggers, []
        if not chunks:
            return {"t_ns": np.empty(0, np.int64), "robot": np.empty(0, np.int64), "cause": np.empty(0, np.uint8)}
        return {name: np.concatenate([c[name] for c in chunks]) for name in ("t_ns", "robot", "cause")}

    def drain_records(self) -> dict[str, np.ndarray]:
        """Rows since the last call in the order they were logged, ``v2x`` columns first, then ``CV2X_COLUMNS``."""
        order = [run for run in self._order if run[1]]
        blocks = {_TX_ROWS: self._tx_columns() if self._tx else None,
                  _RX_ROWS: self._rx[0] if len(self._rx) == 1 else None, _DROP_ROWS: None}
        for kind, chunks in ((_RX_ROWS, self._rx), (_DROP_ROWS, self._drop)):
            if blocks[kind] is None and chunks:
                blocks[kind] = {name: np.concatenate([c[name] for c in chunks]) for name in _DTYPES}
        self._order, self._tx, self._rx, self._drop = [], [], [], []
        if not order:
            return {name: np.empty(0, dt) for name, dt in _DTYPES.items()}
        present = [kind for kind in (_TX_ROWS, _RX_ROWS, _DROP_ROWS) if blocks[kind] is not None]
        start = dict(zip(present, np.cumsum([0] + [len(blocks[kind]["t_ns"]) for kind in present]).tolist(),
                         strict=False))
        at = []
        for kind, rows in order:
            at.append(np.arange(start[kind], start[kind] + rows))
            start[kind] += rows
        take = np.concatenate(at)
        return {name: np.concatenate([blocks[kind][name].astype(dt, copy=False) for kind in present])[take]
                for name, dt in _DTYPES.items()}

    def drain_load(self) -> dict[str, np.ndarray]:
        """Each station's CBR per window since the last call."""
        chunks, self._load = self._load, []
        if not chunks:
            return {"t_ns": np.empty(0, np.int64), "robot": np.empty(0, np.int64), "cbr": np.empty(0)}
        return {name: np.concatenate([c[name] for c in chunks]) for name in ("t_ns", "robot", "cbr")}

    def summary(self) -> dict[str, Any]:
        """Counts for ``metrics()``: CBR mean and max, messages sent, replaced, too big and dropped by congestion
        control, reselections by cause, link outcomes by loss cause (all links within the radius, and the interest
        pairs) and the interest PDR."""
        attempts = sum(self.interest_causes.values())
        return {
            "cbr_mean": self._cbr_sum / self._cbr_count if self._cbr_count else 0.0,
            "cbr_max": self._cbr_max,
            "cams_sent": self.sent,
            "cams_dcc_dropped": self.replaced + self.too_big + self.cr_dropped,
            "cams_replaced": self.replaced,
            "cams_too_big": self.too_big,
            "cams_cr_dropped": self.cr_dropped,
            "reselections": self.reselections,
            "loss_causes": dict(self.causes),
            "interest_loss_causes": dict(self.interest_causes),
            "pdr_interest": self.interest_causes["none"] / attempts if attempts else math.nan,
        }
