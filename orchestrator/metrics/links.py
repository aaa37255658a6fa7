"""Per-link figures from ``trace/v2x.parquet``: CAMs sent and received on a directed link within a window, and
the reception outcomes on the links the applications read (``roles.py``'s intervals).

The trace is never held whole (it grows with simulated time): ``v2x_log`` reads it a row group at a time and keeps
what these figures need, the sent CAMs' senders and generation times and the reception rows, in plain arrays."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .rundata import RunData

RX_OUTCOMES = ("received", "below_sensitivity", "collision", "half_duplex", "jammed")
"""Reception outcomes of ``trace/v2x.parquet`` (``comms_models.base.OUTCOMES`` without the tx ones)."""


class LinkIndex:
    """``trace/v2x.parquet`` arranged once per run for per-link questions: CAMs sent per sender (DCC-dropped ones
    never left) and the received rows grouped by (sender, receiver), so each follower's link costs a lookup rather
    than a pass over every row."""

    def __init__(self, v2x: Mapping[str, np.ndarray]) -> None:
        """From ``trace/v2x.parquet`` columns (all of its rows)."""
        if "message" in v2x and (np.asarray(v2x["message"]) != "cam").any():  # CAM links: platooning messages apart
            cams = np.asarray(v2x["message"]) == "cam"
            v2x = {k: np.asarray(v)[cams] for k, v in v2x.items()}
        event, outcome = v2x["event"], v2x["outcome"]
        is_tx = event == "tx"
        sent = is_tx & (outcome == "sent")
        ok = np.flatnonzero(~is_tx & (outcome == "received"))
        self._arrange(np.asarray(v2x["sender"])[sent], np.asarray(v2x["generated_ns"])[sent],
                      {k: np.asarray(v2x[k])[ok] for k in ("sender", "receiver", "generated_ns", "latency_s", "t_ns")})

    def _arrange(self, tx_sender: np.ndarray, tx_t: np.ndarray, received: Mapping[str, np.ndarray]) -> None:
        """Sorts the sent CAMs (sender, generation time) and the received rows (in trace order) for lookups."""
        tx_order = np.lexsort((tx_t, tx_sender))
        self._tx_sender, self._tx_t = tx_sender[tx_order], tx_t[tx_order]  # by sender, then time
        sender, receiver, generated = received["sender"], received["receiver"], received["generated_ns"]
        order = np.lexsort((generated, receiver, sender))  # per link, by generation time
        self._pairs = np.column_stack([sender[order], receiver[order]])
        self._generated = generated[order]
        self._latency = received["latency_s"][order]
        self._t_ns = received["t_ns"][order]

    def metrics(self, receiver: int, sender: int,
                window_ns: tuple[int, int | None] = (0, None)) -> dict[str, Any]:
        """PDR, latency and inter-reception interval of one directed link, over the CAMs generated in
        ``window_ns`` ([from, until), until None: no end): the time the link exists."""
        return link_figures(*self.counts(receiver, sender, window_ns))

    def counts(self, receiver: int, sender: int, window_ns: tuple[int, int | None] = (0, None)
               ) -> tuple[int, np.ndarray, np.ndarray]:
        """CAMs sent on one directed link in ``window_ns`` (by generation time), and the latencies and reception
        times of those received."""
        key = np.array([sender, receiver])
        lo = _search(self._pairs, key, "left")
        hi = _search(self._pairs, key, "right")
        start, end = window_ns
        generated = self._generated[lo:hi]
        first = lo + int(np.searchsorted(generated, start, side="left"))
        last = hi if end is None else lo + int(np.searchsorted(generated, end, side="left"))
        last = max(first, last)
        return self.sent(sender, window_ns), self._latency[first:last], self._t_ns[first:last]

    def total(self, receiver: int, windows: list[tuple[int, int, int]]) -> tuple[int, np.ndarray, np.ndarray]:
        """``counts`` summed over several (sender, from_ns, to_ns) windows: one link that changed its sender."""
        parts = [self.counts(receiver, sender, (start, end)) for sender, start, end in windows]
        if not parts:
            return 0, np.empty(0), np.empty(0, np.int64)
        return (sum(p[0] for p in parts), np.concatenate([p[1] for p in parts]),
                np.concatenate([p[2] for p in parts]))

    def sent(self, sender: int, window_ns: tuple[int, int | None] = (0, None)) -> int:
        """CAMs ``sender`` sent (not DCC-dropped) that were generated in ``window_ns``."""
        lo = int(np.searchsorted(self._tx_sender, sender, side="left"))
        hi = int(np.searchsorted(self._tx_sender, sender, side="right"))
        times = self._tx_t[lo:hi]
        start, end = window_ns
        first = int(np.searchsorted(times, start, side="left"))
        last = len(times) if end is None else int(np.searchsorted(times, end, side="left"))
        return max(last - first, 0)


@dataclass
class V2xLog:
    """What the link and channel metrics need of ``trace/v2x.parquet``: the counts of the channel block (platooning
    messages apart) and the per-link index of the CAMs."""

    cams_sent: int
    cams_dcc_dropped: int
    pms_sent: int
    interest: dict[str, int]  # ``interest_outcomes``
    links: LinkIndex


V2X_COLUMNS = ("t_ns", "event", "sender", "receiver", "generated_ns", "latency_s", "outcome", "message")
"""The columns of ``trace/v2x.parquet`` the link and channel metrics read."""


def v2x_log(run: RunData) -> V2xLog | None:
    """The run's ``V2xLog`` (None without a V2X trace), read once per run a row group at a time. Of the rows only
    what the figures use is kept: the sent CAMs' senders and times, and the reception rows until their outcomes on
    the links of interest are counted; then only the link index stays. The figures are those of the whole trace
    read at once (``LinkIndex(columns)``, the same rows in the same order)."""
    if "v2x_log" in run.cache:
        return run.cache["v2x_log"]  # type: ignore[no-any-return]
    from .transitions import run_roles

    counts = {"sent": 0, "dcc_dropped": 0, "pm": 0}
    tx: list[tuple[np.ndarray, np.ndarray]] = []

    def keep(group: Mapping[str, np.ndarray]) -> np.ndarray:
        """Counts this row group's transmissions and keeps its other rows (platooning messages apart)."""
        event, outcome = group["event"], group["outcome"]
        message = group.get("message")
        pm = np.zeros(len(event), bool) if message is None else message == "pm"
        is_tx, sent = event == "tx", outcome == "sent"
        counts["pm"] += int(np.count_nonzero(pm & is_tx & sent))
        counts["sent"] += int(np.count_nonzero(~pm & is_tx & sent))
        counts["dcc_dropped"] += int(np.count_nonzero(~pm & (outcome == "dcc_dropped")))
        cam_sent = is_tx & sent & (True if message is None else message == "cam")
        tx.append((group["sender"][cam_sent], group["generated_ns"][cam_sent]))
        return ~pm & ~is_tx

    rows = run.scan("v2x", V2X_COLUMNS, keep)
    log = None
    if rows is not None:
        message = rows.pop("message", None)
        rx = np.flatnonzero(rows["event"] == "rx")
        interest = interest_outcomes({k: rows[k][rx] for k in ("event", "sender", "receiver", "generated_ns",
                                                                 "outcome")}, run_roles(run))
        del rx
        cam = slice(None) if message is None else message == "cam"
        ok = np.flatnonzero(rows["outcome"][cam] == "received")
        received = {k: rows[k][cam][ok] for k in ("sender", "receiver", "generated_ns", "latency_s", "t_ns")}
        del rows, message, ok
        links = LinkIndex.__new__(LinkIndex)
        links._arrange(np.concatenate([t[0] for t in tx]) if tx else np.empty(0, np.int64),
                       np.concatenate([t[1] for t in tx]) if tx else np.empty(0, np.int64), received)
        log = V2xLog(counts["sent"], counts["dcc_dropped"], counts["pm"], interest, links)
    run.cache["v2x_log"] = log
    return log


def channel_busy(run: RunData) -> tuple[float, int, float] | None:
    """The channel busy ratios of ``trace/channel_load.parquet`` (None without it): their sum, taken window by
    window (rows of one DCC window are adjacent and summed together, as the stations report them), their number and
    their largest value. Read a row group at a time; a window cut by a row group's end is carried into the next."""
    from ..recording.trace_schema import check_values, open_trace, read_group

    path = run.path("channel_load")
    if not os.path.lexists(path):
        return None
    parquet = open_trace(path)
    total, count, largest = 0.0, 0, None
    carry_t, carry_cbr = np.empty(0, np.int64), np.empty(0)
    row0 = 0
    for group in range(parquet.num_row_groups):
        table = read_group(parquet, path, group, ["t_ns", "cbr"])
        check_values(path, {c: table.column(c) for c in ("t_ns", "cbr")}, "channel_load", row0)
        row0 += table.num_rows
        t_ns = np.r_[carry_t, table.column("t_ns").to_numpy()]
        cbr = np.r_[carry_cbr, table.column("cbr").to_numpy()]
        if not len(cbr):
            continue
        count += table.num_rows
        top = float(cbr.max())
        largest = top if largest is None else float(np.max([largest, top]))  # NaN spreads as in one max
        windows = np.split(cbr, np.flatnonzero(np.diff(t_ns)) + 1)
        for window in windows[:-1]:
            total += float(window.sum())
        carry_cbr = windows[-1]
        carry_t = t_ns[len(t_ns) - len(carry_cbr):]
    if len(carry_cbr):
        total += float(carry_cbr.sum())
    return total, count, 0.0 if largest is None else largest


def _search(pairs: np.ndarray, key: np.ndarray, side: str) -> int:
    """Where ``key`` (sender, receiver) goes in the lexicographically sorted ``pairs``."""
    lo = int(np.searchsorted(pairs[:, 0], key[0], side="left"))
    hi = int(np.searchsorted(pairs[:, 0], key[0], side="right"))
    return lo + int(np.searchsorted(pairs[lo:hi, 1], key[1], side=side))  # type: ignore[call-overload]


def link_metrics(v2x: Mapping[str, np.ndarray], receiver: int, sender: int) -> dict[str, Any]:
    """PDR, latency and inter-reception interval of one directed link, from ``trace/v2x.parquet`` columns."""
    return LinkIndex(v2x).metrics(receiver=receiver, sender=sender)


def link_figures(n_sent: int, latency: np.ndarray, t_ns: np.ndarray) -> dict[str, Any]:
    intervals = np.diff(np.sort(t_ns) / 1e9)  # within one stretch; summed stretches add one interval per seam
    return {
        "pdr": float(len(latency) / n_sent) if n_sent else None,
        "latency_mean_s": float(np.mean(latency)) if len(latency) else None,
        "latency_p95_s": float(np.percentile(latency, 95)) if len(latency) else None,
        "interval_mean_s": float(np.mean(intervals)) if len(intervals) else None,
    }


def interest_outcomes(v2x: Mapping[str, np.ndarray], roles: Any) -> dict[str, int]:
    """Reception outcomes on the links the applications read: from each robot's predecessor and leader, for the
    CAMs generated while that robot listened to them (the role table's intervals). One sort of the receptions by
    (link, generation time); each interval is then two binary searches."""
    rx = np.flatnonzero(np.asarray(v2x["event"]) == "rx")
    link = (np.asarray(v2x["receiver"])[rx].astype(np.int64) << 32) | np.asarray(v2x["sender"])[rx]  # ids < 2^32
    rows = np.r_[np.flatnonzero(roles.predecessor >= 0),  # a leader that is the predecessor is one link, not two
                 np.flatnonzero((roles.leader >= 0) & (roles.leader != roles.predecessor)) + len(roles.robot)]
    column = np.r_[roles.predecessor, roles.leader][rows]
    robot = np.r_[roles.robot, roles.robot][rows].astype(np.int64)
    start, end = np.r_[roles.from_ns, roles.from_ns][rows], np.r_[roles.to_ns, roles.to_ns][rows]
    keys, link_rank = np.unique(np.r_[link, (robot << 32) | column], return_inverse=True)
    generated = np.asarray(v2x["generated_ns"])[rx].astype(np.int64)
    span = int(max(generated.max(initial=0), end.max(initial=0))) + 1
    if len(keys) * span >= 2**62:  # too long a run for one composite key: one link at a time
        span = 0
    rank_rx, rank_want = link_rank[:len(rx)], link_rank[len(rx):]
    counts = dict.fromkeys(RX_OUTCOMES, 0)
    if span == 0 or not len(rows):
        return counts if not len(rows) else _interest_outcomes_slow(v2x, rx, link, robot, column, start, end)
    composite = rank_rx * span + generated
    order = np.argsort(composite, kind="stable")
    composite = composite[order]
    outcome = np.asarray(v2x["outcome"])[rx][order]
    lo = np.searchsorted(composite, rank_want * span + start, "left")
    hi = np.searchsorted(composite, rank_want * span + np.minimum(end, span), "left")
    for name in RX_OUTCOMES:
        cumulative = np.r_[0, np.cumsum(outcome == name)]
        counts[name] = int(np.sum(cumulative[hi] - cumulative[lo]))
    return counts


def _interest_outcomes_slow(v2x: Mapping[str, np.ndarray], rx: np.ndarray, link: np.ndarray, robot: np.ndarray,
                            column: np.ndarray, start: np.ndarray, end: np.ndarray) -> dict[str, int]:
    """``_interest_outcomes`` an interval at a time (where one composite key would overflow)."""
    generated = np.asarray(v2x["generated_ns"])[rx]
    outcome = np.asarray(v2x["outcome"])[rx]
    counts = dict.fromkeys(RX_OUTCOMES, 0)
    for r, c, a, b in zip(robot, column, start, end, strict=True):
        mine = (link == ((int(r) << 32) | int(c))) & (generated >= a) & (generated < b)
        for name in RX_OUTCOMES:
            counts[name] += int(np.count_nonzero(outcome[mine] == name))
    return counts
