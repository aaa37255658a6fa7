"""PNG plots of a run: trajectories, speeds, spacing errors and string stability (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from .core.robots import RobotSpec
from .metrics import Series

MAX_ROBOTS_DRAWN = 16
"""Beyond this many robots only the first platoons are drawn (a plot of 1,000 lines shows nothing)."""


def _drawn(robots: Sequence[RobotSpec], series: Mapping[int, Series]) -> list[RobotSpec]:
    return [r for r in robots if r.id in series][:MAX_ROBOTS_DRAWN]


def palette(n: int) -> list[Any]:
    """``n`` distinct colours: matplotlib's ten up to ten lines, then tab20, then a continuous map (the default
    cycle repeats after ten, so robot 11 would look like robot 1)."""
    if n <= 10:
        return list(plt.rcParams["axes.prop_cycle"].by_key()["color"])[:max(n, 1)]
    cmap = plt.get_cmap("tab20" if n <= 20 else "turbo")
    return [cmap(j if n <= 20 else j / (n - 1)) for j in range(n)]


def plot_run(
    out_dir: Path,
    robots: Sequence[RobotSpec],
    series: Mapping[int, Series],
    follower_series: Mapping[str, Mapping[str, np.ndarray]],
    followers: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Path]:
    """Write trajectories.png, speeds.png, spacing_errors.png and, given the per-follower metrics,
    string_stability.png; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    drawn = _drawn(robots, series)
    paths = []

    colors = palette(len(drawn))
    fig, ax = plt.subplots(figsize=(7, 5))
    for r, color in zip(drawn, colors, strict=False):
        s = series[r.id]
        ax.plot(s.cols["x"], s.cols["y"], lw=1.2, color=color, label=r.name)
    ax.set_xlabel("x east [m]")
    ax.set_ylabel("y north [m]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title("Trajectories (rear-axle reference point)")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(alpha=0.3)
    paths.append(_save(fig, out_dir / "trajectories.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    for r, color in zip(drawn, colors, strict=False):
        s = series[r.id]
        ax.plot(s.t_ns / 1e9, s.cols["v"], lw=1.2, color=color, label=r.name)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("speed [m/s]")
    ax.set_title("Speeds")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(alpha=0.3)
    paths.append(_save(fig, out_dir / "speeds.png"))

    fig, axes = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    names = list(follower_series)[:MAX_ROBOTS_DRAWN]
    for name, color in zip(names, palette(len(names)), strict=False):
        fs = follower_series[name]
        axes[0].plot(fs["t_s"], fs["spacing_error_m"], lw=1.2, color=color, label=name)
        axes[1].plot(fs["t_s"], fs["lateral_m"], lw=1.2, color=color, label=name)
    axes[0].set_ylabel("spacing error [m]")
    axes[0].set_title("Spacing error: gap - desired gap (gaps while degraded to ACC are left out)", fontsize=10)
    axes[1].set_title("Lateral deviation from the predecessor's path", fontsize=10)
    axes[1].set_ylabel("lateral deviation [m]")
    axes[1].set_xlabel("time [s]")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
    paths.append(_save(fig, out_dir / "spacing_errors.png"))

    if followers and any(r.position_in_platoon >= 2 for r in robots):
        paths.append(_plot_string_stability(out_dir, robots, followers))
    estimated = [r for r in drawn if not np.array_equal(series[r.id].cols["est_x"], series[r.id].cols["x"])]
    if estimated:
        paths.append(_plot_estimate(out_dir, estimated, series))
    return paths


STRING_STABILITY_PANELS = (
    ("l2_spacing_error", "spacing error [m s^0.5]"),
    ("l2_lateral_deviation", "lateral deviation [m s^0.5]"),
    ("l2_speed_deviation", "speed deviation [m s^-0.5]"),
    ("l2_acceleration", "acceleration [m s^-1.5]"),
)
MAX_PLATOONS_DRAWN = 8


def _plot_string_stability(out_dir: Path, robots: Sequence[RobotSpec], followers: Mapping[str, Mapping[str, Any]]
                           ) -> Path:
    """L2 norm of each quantity against the position in the platoon, one line per platoon (log scale where the
    norms span a decade or more): a line that rises from follower to follower is amplification along the chain
    (ratio > 1)."""
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.5))
    platoons = sorted({r.platoon for r in robots})[:MAX_PLATOONS_DRAWN]
    for (key, label), ax in zip(STRING_STABILITY_PANELS, axes.flat, strict=True):
        values = []
        for platoon in platoons:
            rows = [(r.position_in_platoon, followers[r.name].get(key)) for r in robots
                    if r.platoon == platoon and r.name in followers]
            rows = [(pos, val) for pos, val in rows if val is not None and val > 0]
            if rows:
                pos, val = zip(*sorted(rows), strict=True)
                ax.plot(pos, val, "o-", lw=1.2, ms=4, label=f"platoon {platoon}")
                values += val
        if values and max(values) / min(values) >= 10:
            # a log axis only where the norms span a decade; labelled at 1-2-5, minor ticks unlabelled (labels on
            # every minor tick overlap, and two significant digits repeat: "3, 3, 3.1")
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        else:
            ax.ticklabel_format(axis="y", useOffset=False)  # within a decade a linear axis reads better
        ax.set_xlabel("position in the platoon (1 = first follower)")
        ax.set_title(f"L2 norm of the {label.split(' [')[0]}", fontsize=10)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="both")
        ax.xaxis.get_major_locator().set_params(integer=True)
    if len(platoons) > 1:
        axes.flat[0].legend(fontsize=7, ncol=2)
    fig.suptitle("String stability along the chain: rising lines amplify", fontsize=11)
    return _save(fig, out_dir / "string_stability.png")


def _plot_estimate(out_dir: Path, robots: Sequence[RobotSpec], series: Mapping[int, Series]) -> Path:
    """What each robot believed (odometry, fusion) against where it was: position error over time and paths."""
    fig, (ax_err, ax_xy) = plt.subplots(1, 2, figsize=(11, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, r in enumerate(robots):
        s = series[r.id]
        color = colors[j % len(colors)]
        error = np.hypot(s.cols["est_x"] - s.cols["x"], s.cols["est_y"] - s.cols["y"])
        ax_err.plot(s.t_ns / 1e9, error, color=color, lw=1.2, label=r.name)
        ax_xy.plot(s.cols["x"], s.cols["y"], color=color, lw=1.2, label=f"{r.name} truth")
        ax_xy.plot(s.cols["est_x"], s.cols["est_y"], "--", color=color, lw=1.0, label=f"{r.name} estimate")
    ax_err.set_xlabel("time [s]")
    ax_err.set_ylabel("|estimate - truth| [m]")
    ax_err.set_title("Position error of the state estimate")
    ax_xy.set_xlabel("x east [m]")
    ax_xy.set_ylabel("y north [m]")
    ax_xy.set_aspect("equal", adjustable="datalim")
    ax_xy.set_title("Estimate (dashed) vs truth")
    for ax in (ax_err, ax_xy):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    return _save(fig, out_dir / "estimate_vs_truth.png")


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
