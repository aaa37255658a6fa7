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
    return paths


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
