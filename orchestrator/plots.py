"""PNG plots of a run: trajectories, speeds and spacing errors (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from .metrics import Series
from .robots import RobotSpec

MAX_ROBOTS_DRAWN = 16
"""Beyond this many robots only the first platoons are drawn (a plot of 1,000 lines shows nothing)."""


def _drawn(robots: Sequence[RobotSpec], series: Mapping[int, Series]) -> list[RobotSpec]:
    return [r for r in robots if r.id in series][:MAX_ROBOTS_DRAWN]


def plot_run(
    out_dir: Path,
    robots: Sequence[RobotSpec],
    series: Mapping[int, Series],
    follower_series: Mapping[str, Mapping[str, np.ndarray]],
) -> list[Path]:
    """Write trajectories.png, speeds.png and spacing_errors.png; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    drawn = _drawn(robots, series)
    paths = []

    fig, ax = plt.subplots(figsize=(7, 5))
    for r in drawn:
        s = series[r.id]
        ax.plot(s.cols["x"], s.cols["y"], lw=1.2, label=r.name)
    ax.set_xlabel("x east [m]")
    ax.set_ylabel("y north [m]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title("Trajectories (rear-axle reference point)")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(alpha=0.3)
    paths.append(_save(fig, out_dir / "trajectories.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in drawn:
        s = series[r.id]
        ax.plot(s.t_ns / 1e9, s.cols["v"], lw=1.2, label=r.name)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("speed [m/s]")
    ax.set_title("Speeds")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(alpha=0.3)
    paths.append(_save(fig, out_dir / "speeds.png"))

    fig, axes = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for name in list(follower_series)[:MAX_ROBOTS_DRAWN]:
        fs = follower_series[name]
        axes[0].plot(fs["t_s"], fs["spacing_error_m"], lw=1.2, label=name)
        axes[1].plot(fs["t_s"], fs["lateral_m"], lw=1.2, label=name)
    axes[0].set_ylabel("spacing error [m]")
    axes[0].set_title("Spacing error (gap - desired gap) and lateral deviation from the predecessor's path")
    axes[1].set_ylabel("lateral deviation [m]")
    axes[1].set_xlabel("time [s]")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, ncol=2)
    paths.append(_save(fig, out_dir / "spacing_errors.png"))

    estimated = [r for r in drawn if not np.array_equal(series[r.id].cols["est_x"], series[r.id].cols["x"])]
    if estimated:
        paths.append(_plot_estimate(out_dir, estimated, series))
    return paths


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
