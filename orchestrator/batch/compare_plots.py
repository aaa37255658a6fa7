"""The comparison page's figures: every vehicle's path and speed overlaid (colour per robot, line style per
variant), the predecessor speed each follower received against the truth, and the latency and inter-reception
histograms of the links the controllers read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..recording.safe_files import save_figure
from .compare_data import Columns, Link

MAX_PANELS = 12
"""Received-speed panels in one figure at most; more links go in more figures (every link is drawn)."""
STYLES = ("-", "--", ":", "-.")
"""Line style per variant (the colour is the robot's)."""
STYLE_NAMES = ("solid", "dashed", "dotted", "dash-dot")
CHANNEL_COLORS = {"ideal": "#000000", "itsg5": "#0072B2", "cv2x": "#D55E00"}
"""One fixed colour per channel kind in every figure of a comparison (Okabe-Ito: black, blue, vermillion, distinct
under the common colour-vision deficiencies); other variants take the rest of that palette in order."""
OTHER_COLORS = ("#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#999999")
MARKERS = {"ideal": "o", "itsg5": "s", "cv2x": "^"}
"""A marker per channel kind too, so that the curves stay apart in grey print."""


def variant_colors(variants: Sequence[str]) -> dict[str, str]:
    """Each variant's colour: a channel kind's own (``CHANNEL_COLORS``), the others in palette order."""
    spare = iter(OTHER_COLORS * (1 + len(variants) // len(OTHER_COLORS)))
    return {v: CHANNEL_COLORS[v] if v in CHANNEL_COLORS else next(spare) for v in variants}


def _marker(variant: str, k: int) -> str:
    return MARKERS.get(variant, "Dvxp*"[k % 5])


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_overlay(plots_dir: Path, series: dict[str, dict[int, Columns]], names: Mapping[int, str] | None = None,
                 colors: Mapping[str, str] | None = None, groups: Sequence[tuple[str, Sequence[str]]] = ()
                 ) -> Path | None:
    """Every vehicle's path (first panel) and speed, one speed panel per platoon (small multiples: a platoon's
    robots stay distinct and 200 robots make 25 readable panels, not one rainbow): the colour is the robot's, as
    in the runs' own reports, the line style the variant's."""
    from ..reporting.plots import MAX_PANEL_ROBOTS, panels, robot_colors

    if not series:
        return None
    plt = _pyplot()
    names = dict(names or {})
    ids = sorted({rid for robots in series.values() for rid in robots})
    for rid in ids:
        names.setdefault(rid, f"station {rid}")
    colors = colors or robot_colors([names[rid] for rid in ids])
    by_name = {names[rid]: rid for rid in ids}
    drawn, note = panels(groups or [("", [names[rid] for rid in ids])], by_name)
    cols = 2 if drawn else 1
    rows = 1 + -(-len(drawn) // cols) if len(drawn) > 1 else 1
    fig, axes = plt.subplots(rows, cols, figsize=(12, 3.6 * rows), squeeze=False)
    ax_xy = axes[0][0]
    speed_axes = list(axes.flat)[1:] if len(drawn) > 1 else [axes[0][1]]
    for k, robots in enumerate(series.values()):
        style = STYLES[k % len(STYLES)]
        for rid, s in sorted(robots.items()):
            ax_xy.plot(s["x"], s["y"], style, color=colors.get(names[rid], "#555555"), lw=1.0)
    for ax, (label, group) in zip(speed_axes, drawn, strict=False):
        for k, robots in enumerate(series.values()):
            style = STYLES[k % len(STYLES)]
            for name in group:
                s = robots.get(by_name[name])
                if s is not None:
                    ax.plot(s["t_ns"] / 1e9, s["v"], style, color=colors.get(name, "#555555"), lw=1.0,
                            label=name if k == 0 else None)
        for k, variant in enumerate(series):
            ax.plot([], [], STYLES[k % len(STYLES)], color="k", lw=1.0, label=variant)
        ax.set_title(f"speeds, {label}" if label else "speeds", fontsize=9)
        ax.set_xlabel("time [s]", fontsize=8)
        ax.set_ylabel("speed [m/s]", fontsize=8)
        ax.grid(alpha=0.3)
        if len(group) <= MAX_PANEL_ROBOTS:
            ax.legend(fontsize=6, ncol=2 if len(group) > 6 else 1, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    for ax in speed_axes[len(drawn):]:
        ax.set_visible(False)
    ax_xy.set_xlabel("x east [m]")
    ax_xy.set_ylabel("y north [m]")
    ax_xy.set_aspect("equal", adjustable="datalim")
    ax_xy.set_title(f"paths of all {len(ids)} robots" + (f" ({note})" if note else ""), fontsize=9)
    ax_xy.grid(alpha=0.3)
    for k, variant in enumerate(series):
        ax_xy.plot([], [], STYLES[k % len(STYLES)], color="k", lw=1.0, label=variant)
    ax_xy.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="line style", title_fontsize=7)
    fig.tight_layout()
    path = save_figure(fig, plots_dir / "overlay_trajectories_speeds.png")
    plt.close(fig)
    return path


def plot_received_speed(plots_dir: Path, series: dict[str, dict[int, Columns]], links: Sequence[Link],
                        colors: Mapping[str, str] | None = None, by_variant: Mapping[str, str] | None = None
                        ) -> list[tuple[str, Path]]:
    """One panel per link while it existed, ``MAX_PANELS`` to a figure, a figure per platoon (or part of one): the
    predecessor's true speed (wide, pale) and the speed the follower's controller held (a staircase: delay,
    update rate and quantisation), in the predecessor's colour, one line style per variant; with ``by_variant``
    (variant -> colour) each variant's staircase in its own colour and the truth in grey. Returns (title, path)
    of each figure."""
    plt = _pyplot()
    colors = colors or {}
    figures: list[tuple[str, Path]] = []
    by_platoon: dict[str, list[Link]] = {}
    for link in links:
        by_platoon.setdefault(link.platoon, []).append(link)
    for platoon, members in by_platoon.items():
        for start in range(0, len(members), MAX_PANELS):
            chunk = members[start:start + MAX_PANELS]
            cols = 1 if len(chunk) <= 3 else 2
            rows = -(-len(chunk) // cols)
            fig, axes = plt.subplots(rows, cols, figsize=(8 if cols == 1 else 12, 2.6 * rows), squeeze=False)
            for ax, link in zip(axes.flat, chunk, strict=False):
                color = colors.get(link.predecessor_name, "#1f77b4")
                for k, (c, s) in enumerate(series.items()):
                    style = STYLES[k % len(STYLES)]
                    held = color if by_variant is None else by_variant.get(c, color)
                    if link.predecessor in s:
                        pred = s[link.predecessor]
                        t = pred["t_ns"] / 1e9
                        keep = (t >= link.from_s) & (t <= link.to_s)
                        ax.plot(t[keep], pred["v"][keep], style, color=color if by_variant is None else "#888888",
                                lw=2.5, alpha=0.3, label=f"truth ({c} run)")
                    if link.follower in s and "pred_v" in s[link.follower]:
                        f = s[link.follower]
                        t = f["t_ns"] / 1e9
                        keep = (t >= link.from_s) & (t <= link.to_s)
                        ax.step(t[keep], f["pred_v"][keep], style, where="post", color=held,
                                lw=1.0 if by_variant is None else 1.4,
                                label=f"received via {c}")
                ax.set_ylabel(f"v of {link.predecessor_name} [m/s]", fontsize=8)
                until = "end" if link.to_s == float("inf") else f"{link.to_s:.1f} s"
                ax.set_title(f"{link.predecessor_name} as received by {link.follower_name}, {link.from_s:.1f} s to "
                             f"{until}", fontsize=9)
                ax.set_xlabel("time [s]", fontsize=8)
                ax.grid(alpha=0.3)
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(fontsize=7, loc="lower right")
            for ax in list(axes.flat)[len(chunk):]:
                ax.set_visible(False)
            fig.tight_layout()
            part = f"_{start // MAX_PANELS + 1}" if len(members) > MAX_PANELS else ""
            path = save_figure(fig, plots_dir / f"received_predecessor_speed_{_file_part(platoon)}{part}.png")
            plt.close(fig)
            names = ", ".join(link.follower_name for link in chunk)
            figures.append((f"{platoon}: {len(chunk)} links ({names})", path))
    return figures


def _file_part(text: str) -> str:
    """``text`` as a safe part of a file name."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text) or "platoon"


def plot_histograms(plots_dir: Path, v2x: dict[str, Columns | None], pairs: set[tuple[int, int]],
                    colors: Mapping[str, str] | None = None) -> Path | None:
    """Latency and time between receptions on the links the controllers read ((receiver, sender) ``pairs``), one
    empirical CDF per variant: variants with 100 times more samples (an ideal channel delivers every step) stay
    comparable, and log axes show milliseconds and seconds together (latency on a symmetric log axis, so the
    ideal channel's zero shows at 0)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    drawn = False
    keys = np.asarray(sorted((r << 32) | s for r, s in pairs), np.int64)
    for c, trace in v2x.items():
        if trace is None:
            continue
        rx = (trace["event"] == "rx") & (trace["outcome"] == "received")
        key = (np.asarray(trace["receiver"], np.int64) << 32) | np.asarray(trace["sender"], np.int64)
        ok = rx & np.isin(key, keys)
        if not ok.any():
            continue
        latency = np.sort(np.asarray(trace["latency_s"])[ok] * 1e3)
        t, link = np.asarray(trace["t_ns"])[ok], key[ok]
        order = np.lexsort((t, link))
        same = link[order][1:] == link[order][:-1]
        intervals = np.sort(np.diff(t[order])[same] / 1e9)
        style = STYLES[list(v2x).index(c) % len(STYLES)]
        for ax, values in ((axes[0], latency), (axes[1], intervals)):
            if len(values):  # variants by line style and their colour (``variant_colors``), as on the whole page
                ax.step(values, np.arange(1, len(values) + 1) / len(values), style, where="post",
                        color=(colors or {}).get(c, "#333333"), lw=1.4, label=f"{c} ({len(values):,})")
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    axes[0].set_xscale("symlog", linthresh=0.1)
    axes[1].set_xscale("log")
    axes[0].set_xlabel("latency [ms] (linear below 0.1 ms)")
    axes[1].set_xlabel("time between receptions on a link [s]")
    axes[0].set_title("Latency (ECDF)", fontsize=10)
    axes[1].set_title("Inter-reception time (ECDF)", fontsize=10)
    for ax in axes:
        ax.set_ylabel("fraction at or below")
        ax.set_ylim(0, 1.02)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="lower right")
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    path = save_figure(fig, plots_dir / "latency_interval_histograms.png")
    plt.close(fig)
    return path


def plot_channel_figures(plots_dir: Path, links: Mapping[str, Columns], aoi: Mapping[str, np.ndarray],
                         colors: Mapping[str, str]) -> Path | None:
    """The channels side by side on the links the controllers read (``compare_data.link_receptions``): PDR against
    the sender-receiver distance (bins of equal width over the distances seen; the marker's size is not the
    count), the tail of the inter-packet gap (the share of gaps longer than x, log-log: the long outages a
    controller has to ride out), and the age of information the laws used (ECDF, linear below 1 ms so the ideal
    channel's zero shows). One colour and marker per channel kind, as in every figure of the page."""
    if not any(len(c["distance_m"]) for c in links.values()) and not any(len(a) for a in aoi.values()):
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.0))
    ax_pdr, ax_gap, ax_aoi = axes
    distances = np.concatenate([c["distance_m"] for c in links.values()] or [np.zeros(0)])
    edges = _distance_bins(distances)
    for k, (c, cols) in enumerate(links.items()):
        color, marker = colors.get(c, "#333333"), _marker(c, k)
        if len(cols["distance_m"]) and len(edges) > 1:
            which = np.clip(np.searchsorted(edges, cols["distance_m"], side="right") - 1, 0, len(edges) - 2)
            sent = np.bincount(which, minlength=len(edges) - 1)
            got = np.bincount(which, weights=cols["received"].astype(np.float64), minlength=len(edges) - 1)
            has = sent > 0
            mid = (edges[:-1] + edges[1:]) / 2
            ax_pdr.plot(mid[has], got[has] / sent[has], "-", marker=marker, color=color, lw=1.4, ms=5,
                        label=f"{c} ({int(sent.sum()):,} receptions due)")
        gaps = np.sort(cols["gap_s"])
        if len(gaps):
            tail = 1.0 - np.arange(len(gaps)) / len(gaps)  # share of gaps >= each value
            ax_gap.step(gaps, tail, "-", where="post", color=color, lw=1.4, label=f"{c} ({len(gaps):,} gaps)")
            ax_gap.plot(gaps[-1:], tail[-1:], marker, color=color, ms=6)  # the longest gap
    for c, ages in aoi.items():
        ages = np.sort(ages)
        if len(ages):
            ax_aoi.step(ages * 1e3, np.arange(1, len(ages) + 1) / len(ages), "-", where="post",
                        color=colors.get(c, "#333333"), lw=1.4, label=f"{c} (mean {np.mean(ages) * 1e3:.0f} ms)")
    ax_pdr.set_xlabel("distance sender-receiver [m]")
    ax_pdr.set_ylabel("packet delivery ratio")
    ax_pdr.set_ylim(-0.02, 1.02)
    ax_pdr.set_title("PDR against distance", fontsize=10)
    ax_gap.set_xscale("log")
    ax_gap.set_yscale("log")
    ax_gap.set_xlabel("inter-packet gap on a link [s]")
    ax_gap.set_ylabel("share of gaps at least this long")
    ax_gap.set_title("Inter-packet gap tail (CCDF)", fontsize=10)
    ax_aoi.set_xscale("symlog", linthresh=1.0)
    ax_aoi.set_xlabel("age of the data the law used [ms] (linear < 1 ms)")
    ax_aoi.set_ylabel("fraction of control steps at or below")
    ax_aoi.set_ylim(0, 1.02)
    ax_aoi.set_title("Age of information (ECDF)", fontsize=10)
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="lower left" if ax is ax_gap else "lower right")
    fig.tight_layout()
    path = save_figure(fig, plots_dir / "channel_pdr_gap_aoi.png")
    plt.close(fig)
    return path


def _distance_bins(distances: np.ndarray, bins: int = 12) -> np.ndarray:
    """Bin edges of a round width over the distances seen (about ``bins`` bins; one bin when all are equal)."""
    if not len(distances):
        return np.zeros(0)
    low, high = float(np.min(distances)), float(np.max(distances))
    span = high - low
    if span <= 0:
        return np.asarray([low - 0.5, low + 0.5])
    raw = span / bins
    step = min((m * 10.0 ** np.floor(np.log10(raw)) for m in (1, 2, 5, 10)
                if m * 10.0 ** np.floor(np.log10(raw)) >= raw), default=raw)
    start = np.floor(low / step) * step
    return start + step * np.arange(int(np.ceil((high - start) / step)) + 2)


METRIC_PANELS = (
    ("pdr", "PDR (worst link)", 1.0),
    ("latency_mean_s", "mean latency [ms]", 1e3),
    ("aoi_mean_s", "mean age of information [ms]", 1e3),
    ("spacing_error_rms_m", "spacing error RMS [m]", 1.0),
    ("spacing_error_max_m", "worst spacing error [m]", 1.0),
    ("min_gap_m", "smallest gap [m]", 1.0),
)
"""The platoon metrics drawn as bars (worst follower), with their label and scale."""


def plot_metric_bars(plots_dir: Path, summary: Mapping[str, Mapping[str, Any]], variants: Sequence[str],
                     colors: Mapping[str, str]) -> Path | None:
    """The headline platoon and link metrics (``METRIC_PANELS``, worst follower) as bars, one panel per metric,
    one bar per variant in its colour, the value written on the bar."""
    present = [(key, label, scale) for key, label, scale in METRIC_PANELS
               if any((summary.get(key) or {}).get(v) is not None for v in variants)]
    if not present:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(present), figsize=(2.4 * len(present), 3.0), squeeze=False)
    for ax, (key, label, scale) in zip(axes[0], present, strict=True):
        values = [(summary.get(key) or {}).get(v) for v in variants]
        heights = [0.0 if x is None else float(x) * scale for x in values]
        bars = ax.bar(range(len(variants)), heights, color=[colors.get(v, "#333333") for v in variants])
        for bar, x, h in zip(bars, values, heights, strict=True):
            ax.annotate("-" if x is None else f"{h:.3g}", (bar.get_x() + bar.get_width() / 2, h),
                        ha="center", va="bottom", fontsize=7, xytext=(0, 1), textcoords="offset points")
        ax.set_xticks(range(len(variants)), variants, fontsize=8, rotation=30 if len(variants) > 3 else 0)
        ax.set_title(label, fontsize=9)
        ax.margins(y=0.15)
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    path = save_figure(fig, plots_dir / "platoon_metrics_bars.png")
    plt.close(fig)
    return path
