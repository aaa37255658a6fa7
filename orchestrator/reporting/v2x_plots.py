"""V2X plots of one run, from its run directory: what the channel did to the messages the applications read.

- ``v2x_pdr_distance.png``: packet delivery ratio against sender-receiver distance (at generation time), with the
  analytic single-frame reception probability of the configured radio beside it (no interference), so loss from
  propagation and loss from the channel's load can be told apart;
- ``v2x_latency.png``: empirical CDFs of the latency and of the inter-reception time per link, on log axes (an
  ideal and a real channel differ by orders of magnitude);
- ``v2x_over_time.png``: age of the predecessor's information at each follower (AoI) and the channel busy ratio
  (mean and max over the stations) over time;
- ``v2x_generation.png``: the CAMs generated per second by trigger (vehicle dynamics, the T_GenCam timer, the
  first CAM) and the DCC state over time (the shortest interval DCC allows between a station's CAMs).

Only a channel with a radio gets them (rows with a received power); the ideal channel's latency is zero and its
PDR one by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from core.robots import RobotSpec

from .plots import PlotJob, draw_job, pyplot, save

if TYPE_CHECKING:
    from orchestrator.metrics import RunData, Series

POSITION_POINTS = 4000
"""Samples per robot kept to look up distances (nearest sample in time: an error of at most half a sample's
travel, millimetres to decimetres, against distance bins of metres)."""
MAX_BINS = 40
AOI_BINS = 200


def has_radio(v2x: Mapping[str, np.ndarray] | None) -> bool:
    """Whether a V2X log comes from a channel with a radio (any finite received power)."""
    if v2x is None or not len(v2x.get("rx_power_dbm", ())):
        return False
    return bool(np.isfinite(np.asarray(v2x["rx_power_dbm"], np.float64)).any())


def plot_v2x(run: RunData, out_dir: Path) -> list[Path]:
    """The V2X plots of a run with a radio channel (none otherwise); returns their paths."""
    return [draw_job(out_dir, job, DRAWERS) for job in v2x_plot_jobs(run)]


def v2x_plot_jobs(run: RunData) -> list[PlotJob]:
    """The V2X figures of a run with a radio channel (none otherwise), with the data each draws: everything read
    from the run directory and the radio's analytic curve are computed here, so drawing needs only matplotlib."""
    # the receptions only, a row group at a time and not kept: the whole log grows with simulated time
    v2x = run.scan("v2x", ("event", "sender", "receiver", "generated_ns", "outcome", "latency_s", "t_ns",
                           "rx_power_dbm"),
                   lambda g: (g["event"] == "rx") | np.isfinite(np.asarray(g["rx_power_dbm"], np.float64)))
    if not has_radio(v2x):
        return []
    assert v2x is not None
    rx = np.flatnonzero(np.asarray(v2x["event"]) == "rx")
    sender, receiver = np.asarray(v2x["sender"])[rx], np.asarray(v2x["receiver"])[rx]
    generated = np.asarray(v2x["generated_ns"])[rx]
    received = np.asarray(v2x["outcome"])[rx] == "received"
    stride = max(1, run.vehicle_rows() // max(len(run.robots), 1) // POSITION_POINTS)
    series = run.series(np.unique(np.r_[sender, receiver]).tolist(), ("x", "y", "pred_age_s"), stride)
    bins = pdr_by_distance(_distances(series, sender, receiver, generated), received)
    t_rx = np.asarray(v2x["t_ns"])[rx][received]
    load = channel_load_windows(run)
    jobs = [PlotJob("v2x_pdr_distance.png", "v2x_pdr", {"bins": bins, "analytic": _analytic(run, bins[0])}),
            PlotJob("v2x_latency.png", "v2x_latency",
                    {"latency_s": np.asarray(v2x["latency_s"])[rx][received], "sender": sender[received],
                     "receiver": receiver[received], "t_ns": t_rx}),
            PlotJob("v2x_over_time.png", "v2x_over_time", {**_ages(run.robots, series), "load": load})]
    triggers = _columns(run.scan("cam_triggers", ("t_ns", "cause")), ("t_ns", "cause"))
    if triggers is not None and len(triggers.get("t_ns", ())):
        jobs.append(PlotJob("v2x_generation.png", "v2x_generation", {"triggers": triggers, "load": load}))
    return jobs


def _ages(robots: Sequence[RobotSpec], series: Mapping[int, Series]) -> dict[str, Any]:
    """What the age-of-information panel reads: the followers and the age of their predecessor's data (not every
    robot's positions, which a thousand-robot run would copy to the worker for nothing)."""
    from orchestrator.metrics import Series

    # every robot that held a predecessor's data at some time: joiners too, not only the followers as spawned
    followers = [r for r in robots if r.id in series and np.isfinite(series[r.id].cols["pred_age_s"]).any()]
    return {"robots": followers, "series": {r.id: Series(series[r.id].t_ns, {"pred_age_s": series[r.id].cols[
        "pred_age_s"]}) for r in followers}}


def load_windows(table: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray] | None:
    """What the figures show of the channel load: per DCC window, the mean and maximum CBR over the stations and
    the largest and smallest DCC gap. Summed here, so a job carries one row per window instead of one per station
    and window (3.6 million rows in an hour of 100 stations, all of it pickled to a plot worker before)."""
    if table is None or not len(table.get("t_ns", ())):
        return None
    windows, cbr = per_window(table["t_ns"], table["cbr"])
    out = {"t_ns": windows, "cbr_mean": np.array([w.mean() for w in cbr]), "cbr_max": np.array([w.max() for w in cbr])}
    if "dcc_t_off_s" in table and np.isfinite(np.asarray(table["dcc_t_off_s"], np.float64)).any():
        _, off = per_window(table["t_ns"], table["dcc_t_off_s"])
        out |= {"dcc_max": np.array([w.max() for w in off]), "dcc_min": np.array([w.min() for w in off])}
    return out


LOAD_COLUMNS = ("t_ns", "cbr", "dcc_t_off_s")


def channel_load_windows(run: RunData) -> dict[str, np.ndarray] | None:
    """``load_windows`` of ``trace/channel_load.parquet``, read a row group at a time (the trace has a row per
    station and DCC window: 3.6 million in an hour of 100 stations, and sorting them whole was the outputs' peak).
    The trace is written window after window, so each window's rows are adjacent: a window cut by a row group's end
    is carried into the next, and each gets the same figures as ``load_windows`` gives it. A trace not in time order
    is read whole instead."""
    import os

    from orchestrator.recording.trace_schema import check_values, open_trace, read_group

    path = run.path("channel_load")
    if not os.path.lexists(path):
        return None
    parquet = open_trace(path)
    names = set(parquet.schema_arrow.names)
    cols = [c for c in LOAD_COLUMNS if c in names]
    figures: dict[str, list[Any]] = {k: [] for k in ("t_ns", "cbr_mean", "cbr_max", "dcc_max", "dcc_min")}
    carry: dict[str, np.ndarray] | None = None
    dcc_seen, row0 = False, 0
    for group in range(parquet.num_row_groups):
        table = read_group(parquet, path, group, cols)
        check_values(path, {c: table.column(c) for c in cols}, "channel_load", row0)
        row0 += table.num_rows
        data = {c: np.asarray(table.column(c).to_numpy(), np.int64 if c == "t_ns" else np.float64) for c in cols}
        if carry is not None:
            if len(data["t_ns"]) and data["t_ns"][0] < carry["t_ns"][-1]:
                return load_windows(run.scan("channel_load", LOAD_COLUMNS))
            data = {c: np.r_[carry[c], data[c]] for c in cols}
        t_ns = data["t_ns"]
        if not len(t_ns):
            continue
        if (np.diff(t_ns) < 0).any():
            return load_windows(run.scan("channel_load", LOAD_COLUMNS))
        starts = np.flatnonzero(np.r_[True, t_ns[1:] != t_ns[:-1]])
        _add_windows(figures, data, starts[:-1], starts[1:])
        carry = {c: v[starts[-1]:] for c, v in data.items()}
        if "dcc_t_off_s" in data:
            dcc_seen = dcc_seen or bool(np.isfinite(data["dcc_t_off_s"]).any())
    if carry is not None:
        _add_windows(figures, carry, np.array([0]), np.array([len(carry["t_ns"])]))
    if not figures["t_ns"]:
        return None
    out = {"t_ns": np.asarray(figures["t_ns"], np.int64), "cbr_mean": np.array(figures["cbr_mean"]),
           "cbr_max": np.array(figures["cbr_max"])}
    if dcc_seen:
        out |= {"dcc_max": np.array(figures["dcc_max"]), "dcc_min": np.array(figures["dcc_min"])}
    return out


def _add_windows(figures: dict[str, list[Any]], data: Mapping[str, np.ndarray], starts: np.ndarray,
                 ends: np.ndarray) -> None:
    """Appends the figures of the windows ``data[start:end]`` (one DCC window each) to ``figures``."""
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        cbr = data["cbr"][a:b]
        figures["t_ns"].append(int(data["t_ns"][a]))
        figures["cbr_mean"].append(cbr.mean())
        figures["cbr_max"].append(cbr.max())
        if "dcc_t_off_s" in data:
            off = data["dcc_t_off_s"][a:b]
            figures["dcc_max"].append(off.max())
            figures["dcc_min"].append(off.min())


def _columns(table: Mapping[str, np.ndarray] | None, names: Sequence[str]) -> dict[str, np.ndarray] | None:
    """The columns of a trace a figure reads, strings as a fixed-width array: a job carries raw buffers, not
    millions of Python strings."""
    if table is None:
        return None
    return {k: np.asarray(table[k]).astype(str) if np.asarray(table[k]).dtype == object else table[k]
            for k in names if k in table}


def _analytic(run: RunData, centre: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The configured radio's single-frame reception probability over the measured distances (None without an
    ITS-G5 radio or without measured bins)."""
    radio = _radio(run)
    if radio is None or not len(centre):
        return None
    from comms_models.itsg5.radio import reception_probability

    grid = np.linspace(0.1, float(centre.max()) * 1.05, 200)
    return grid, reception_probability(grid, radio)


def _plot_generation(path: Path, triggers: Mapping[str, np.ndarray], load: Mapping[str, np.ndarray] | None
                     ) -> Path:
    """Why CAMs were generated (per cause, per time bin) and the DCC gap the stations were held to."""
    plt = pyplot()
    fig, (ax_cause, ax_dcc) = plt.subplots(2, 1, figsize=(9.5, 5.5), sharex=True)
    t = np.asarray(triggers["t_ns"]) / 1e9
    cause = np.asarray(triggers["cause"]).astype(str)
    edges = np.linspace(t.min(), t.max() + 1e-9, min(AOI_BINS, max(2, len(t) // 10)) + 1)
    width = edges[1] - edges[0]
    bottom = np.zeros(len(edges) - 1)
    for name, color in (("first", "#7f7f7f"), ("dynamics", "#d62728"), ("timer", "#1f77b4")):
        counts = np.histogram(t[cause == name], edges)[0] / width
        if counts.any():
            ax_cause.bar(edges[:-1], counts, width=width, bottom=bottom, align="edge", color=color,
                         label=f"{name} ({int(np.count_nonzero(cause == name)):,})")
            bottom += counts
    ax_cause.set_ylabel("CAMs generated per second")
    ax_cause.set_title("CAM generation by trigger: dynamics (heading, position, speed) or T_GenCam timer")
    ax_cause.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if load is not None and "dcc_max" in load:  # per window (``load_windows``)
        ax_dcc.step(load["t_ns"] / 1e9, load["dcc_max"], where="post", label="max over stations")
        ax_dcc.step(load["t_ns"] / 1e9, load["dcc_min"], where="post", label="min over stations")
        ax_dcc.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax_dcc.set_ylabel("DCC T_off [s]")
    ax_dcc.set_xlabel("time [s]")
    ax_dcc.set_title("DCC state: shortest interval allowed between a station's CAMs")
    for ax in (ax_cause, ax_dcc):
        ax.grid(alpha=0.3)
    return save(fig, path)


def _distances(series: Mapping[int, Series], sender: np.ndarray, receiver: np.ndarray,
               t_ns: np.ndarray) -> np.ndarray:
    """Distance between each pair at ``t_ns`` (nearest recorded sample of each robot; NaN when one is missing)."""
    out = np.full(len(t_ns), np.nan)
    xy = {}
    for ids in (sender, receiver):
        for rid in np.unique(ids).tolist():
            if rid in series and rid not in xy:
                s = series[rid]
                xy[rid] = (s.t_ns, s.cols["x"], s.cols["y"])
    pos = np.full((2, len(t_ns), 2), np.nan)
    for k, ids in enumerate((sender, receiver)):
        for rid in np.unique(ids).tolist():
            if rid not in xy:
                continue
            t, x, y = xy[rid]
            rows = np.flatnonzero(ids == rid)
            j = np.clip(np.searchsorted(t, t_ns[rows]), 0, len(t) - 1)
            earlier = np.clip(j - 1, 0, len(t) - 1)
            j = np.where(np.abs(t[earlier] - t_ns[rows]) < np.abs(t[j] - t_ns[rows]), earlier, j)
            pos[k, rows, 0], pos[k, rows, 1] = x[j], y[j]
    out[:] = np.hypot(*(pos[0] - pos[1]).T)
    return out


def _radio(run: RunData) -> Any:
    """The ITS-G5 radio parameters of the run (None for another channel model)."""
    channel = run.scenario.channel.model_dump(mode="json")
    if channel.pop("type", None) != "itsg5":
        return None
    from comms_models.itsg5.params import ItsG5Params

    return ItsG5Params(**channel).radio


def pdr_by_distance(distance: np.ndarray, received: np.ndarray, max_bins: int = MAX_BINS
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bin centres [m], PDR, attempts and the Wilson 95 % interval half-width of the bins that have attempts
    (reception attempts at a known distance, equal-width bins from 0 to the largest distance)."""
    known = np.isfinite(distance)
    d, ok = distance[known], received[known].astype(np.float64)
    if not len(d):
        empty = np.empty(0)
        return empty, empty, empty, empty
    edges = np.linspace(0.0, max(float(d.max()), 1e-3) * 1.0001, min(max_bins, max(2, int(np.sqrt(len(d))))) + 1)
    which = np.digitize(d, edges) - 1
    attempts = np.bincount(which, minlength=len(edges) - 1)[: len(edges) - 1]
    hits = np.bincount(which, weights=ok, minlength=len(edges) - 1)[: len(edges) - 1]
    filled = attempts > 0
    n, pdr = attempts[filled], hits[filled] / attempts[filled]
    z = 1.96  # Wilson score interval (Wilson, JASA 22(158), 1927): honest for bins with few attempts
    half = z * np.sqrt(pdr * (1 - pdr) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return 0.5 * (edges[:-1] + edges[1:])[filled], pdr, n, half


def _plot_pdr(path: Path, bins: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
              analytic: tuple[np.ndarray, np.ndarray] | None) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    centre, pdr, n, half = bins
    if len(centre):
        z = 1.96
        mid = (pdr + z * z / (2 * n)) / (1 + z * z / n)
        below, above = np.maximum(pdr - (mid - half), 0.0), np.maximum((mid + half) - pdr, 0.0)  # rounding
        ax.errorbar(centre, pdr, yerr=[below, above], fmt="o", ms=4, capsize=2,
                    label=f"measured ({int(n.sum()):,} receptions of links the applications read)")
        if analytic is not None:
            ax.plot(*analytic, "k--", lw=1.2, label="analytic: one frame above sensitivity, no interference")
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlabel("sender-receiver distance at generation [m]")
    ax.set_ylabel("packet delivery ratio")
    ax.set_title("PDR against distance")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # an empty legend is a warning on stderr
        ax.legend(fontsize=8, loc="lower left")
    return save(fig, path)


def _ecdf(ax: Any, values: np.ndarray, label: str) -> None:
    values = np.sort(values[np.isfinite(values) & (values > 0)])
    if len(values):
        ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post", label=label)


def _plot_latency(path: Path, latency_s: np.ndarray, sender: np.ndarray, receiver: np.ndarray,
                  t_ns: np.ndarray) -> Path:
    plt = pyplot()
    import matplotlib.ticker

    fig, (ax_lat, ax_gap) = plt.subplots(1, 2, figsize=(10, 4))
    _ecdf(ax_lat, latency_s * 1e3, f"{len(latency_s):,} receptions")
    order = np.lexsort((t_ns, receiver, sender))
    same = (sender[order][1:] == sender[order][:-1]) & (receiver[order][1:] == receiver[order][:-1])
    gaps = np.diff(t_ns[order])[same] / 1e9
    _ecdf(ax_gap, gaps, f"{len(gaps):,} intervals")
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    for ax, what in ((ax_lat, "latency [ms]"), (ax_gap, "time between receptions on a link [s]")):
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
        ax.xaxis.set_major_formatter(plain)  # labels even when the data span less than a decade
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(what)
        ax.set_ylabel("fraction at or below")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="lower right")
    ax_lat.set_title("Latency (ECDF)")
    ax_gap.set_title("Inter-reception time (ECDF)")
    return save(fig, path)


def _plot_over_time(path: Path, robots: Sequence[RobotSpec], series: Mapping[int, Series],
                    load: Mapping[str, np.ndarray] | None) -> Path:
    plt = pyplot()
    fig, (ax_aoi, ax_cbr) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    followers = [r for r in robots if r.id in series]
    if followers:
        # one sawtooth per follower is unreadable beyond a few: mean and max over every follower, per time bin
        t = np.concatenate([series[r.id].t_ns for r in followers]) / 1e9
        age = np.concatenate([series[r.id].cols["pred_age_s"] for r in followers])
        keep = np.isfinite(age)
        t, age = t[keep], age[keep]
        if len(t):
            edges = np.linspace(t.min(), t.max() + 1e-9, AOI_BINS + 1)
            which = np.digitize(t, edges) - 1
            count = np.bincount(which, minlength=AOI_BINS)[:AOI_BINS]
            mean = np.bincount(which, weights=age, minlength=AOI_BINS)[:AOI_BINS] / np.maximum(count, 1)
            peak = np.full(AOI_BINS, -np.inf)
            np.maximum.at(peak, which, age)
            centre = 0.5 * (edges[:-1] + edges[1:])
            has = count > 0
            ax_aoi.plot(centre[has], mean[has], label="mean over followers")
            ax_aoi.plot(centre[has], peak[has], label="max over followers")
            ax_aoi.legend(fontsize=8, loc="upper left")  # a fixed place: "best" is a search that can warn
    ax_aoi.set_ylabel("age of predecessor data [s]")
    ax_aoi.set_title(f"Age of information at the followers ({len(followers)}; per {AOI_BINS}th of the run)")
    if load is not None and len(load.get("t_ns", ())):  # per window (``load_windows``)
        ax_cbr.plot(load["t_ns"] / 1e9, load["cbr_mean"], label="mean over stations")
        ax_cbr.plot(load["t_ns"] / 1e9, load["cbr_max"], label="max over stations")
        ax_cbr.legend(fontsize=8, loc="upper left")
    ax_cbr.set_ylabel("channel busy ratio")
    ax_cbr.set_xlabel("time [s]")
    ax_cbr.set_title("Channel load (CBR per DCC window)")
    for ax in (ax_aoi, ax_cbr):
        ax.grid(alpha=0.3)
    return save(fig, path)


def per_window(t_ns: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The distinct window end times of a channel-load table and, per window, the stations' values."""
    order = np.argsort(np.asarray(t_ns), kind="stable")
    t, v = np.asarray(t_ns)[order], np.asarray(values, np.float64)[order]
    windows, start = np.unique(t, return_index=True)
    return windows, np.split(v, start[1:])


DRAWERS: dict[str, Callable[..., Path]] = {
    "v2x_pdr": _plot_pdr, "v2x_latency": _plot_latency, "v2x_over_time": _plot_over_time,
    "v2x_generation": _plot_generation,
}
"""The V2X drawing functions a ``PlotJob`` may name."""
