"""PNG plots of a run: trajectories, speeds, spacing errors and string stability (matplotlib, headless).

Each figure is a ``PlotJob``: a file name, the name of its drawing function and that function's arguments (plain
data: arrays, robots, metrics). ``run_plot_jobs`` decides which figures a run gets without matplotlib; the jobs are
drawn here (``plot_run``) or in a worker process beside the run (``plot_worker``), with the same bytes either way.
matplotlib itself is imported on the first drawing, so planning costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .core.robots import RobotSpec

if TYPE_CHECKING:
    from .metrics import Series

MAX_ROBOTS_DRAWN = 16
"""Beyond this many robots only the first platoons are drawn (a plot of 1,000 lines shows nothing)."""


@dataclass(frozen=True)
class PlotJob:
    """One PNG to draw: ``draw`` names a function of ``DRAWERS`` (here or in ``v2x_plots``), called as
    ``fn(out_dir / file, **args)``."""

    file: str
    draw: str
    args: dict[str, Any] = field(default_factory=dict)


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the headless Agg backend (imported on first use: planning needs none of it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _drawn(robots: Sequence[RobotSpec], series: Mapping[int, Series]) -> list[RobotSpec]:
    return [r for r in robots if r.id in series][:MAX_ROBOTS_DRAWN]


def palette(n: int) -> list[Any]:
    """``n`` distinct colours: matplotlib's ten up to ten lines, then tab20, then a continuous map (the default
    cycle repeats after ten, so robot 11 would look like robot 1)."""
    plt = pyplot()
    if n <= 10:
        return list(plt.rcParams["axes.prop_cycle"].by_key()["color"])[:max(n, 1)]
    cmap = plt.get_cmap("tab20" if n <= 20 else "turbo")
    return [cmap(j if n <= 20 else j / (n - 1)) for j in range(n)]


def series_plot_jobs(robots: Sequence[RobotSpec], series: Mapping[int, Series]) -> list[PlotJob]:
    """The figures drawn from the vehicle samples alone (trajectories, speeds, the state estimate): they can be
    drawn while the metrics are computed. Only the drawn robots' samples are carried."""
    drawn = _drawn(robots, series)
    carried = {r.id: series[r.id] for r in drawn}
    jobs = [PlotJob("trajectories.png", "trajectories", {"robots": drawn, "series": carried}),
            PlotJob("speeds.png", "speeds", {"robots": drawn, "series": carried})]
    estimated = [r for r in drawn if not np.array_equal(series[r.id].cols["est_x"], series[r.id].cols["x"])]
    if estimated:
        jobs.append(PlotJob("estimate_vs_truth.png", "estimate", {"robots": estimated, "series": carried}))
    return jobs


def follower_plot_jobs(robots: Sequence[RobotSpec], follower_series: Mapping[str, Mapping[str, np.ndarray]],
                       followers: Mapping[str, Mapping[str, Any]] | None = None) -> list[PlotJob]:
    """The figures drawn from the follower metrics: spacing errors and, with followers beyond the first,
    string stability."""
    names = list(follower_series)[:MAX_ROBOTS_DRAWN]
    jobs = [PlotJob("spacing_errors.png", "spacing_errors", {"follower_series": {n: follower_series[n]
                                                                                  for n in names}})]
    if followers and any(r.position_in_platoon >= 2 for r in robots):
        jobs.append(PlotJob("string_stability.png", "string_stability",
                            {"robots": list(robots), "followers": followers}))
    return jobs


def ordered(jobs: Sequence[PlotJob]) -> list[PlotJob]:
    """The jobs in the order ``plot_run`` has always returned its files (the report shows them in this order)."""
    rank = {name: k for k, name in enumerate(("trajectories.png", "speeds.png", "spacing_errors.png",
                                              "string_stability.png", "estimate_vs_truth.png"))}
    return sorted(jobs, key=lambda job: rank.get(job.file, len(rank)))


def run_plot_jobs(robots: Sequence[RobotSpec], series: Mapping[int, Series],
                  follower_series: Mapping[str, Mapping[str, np.ndarray]],
                  followers: Mapping[str, Mapping[str, Any]] | None = None) -> list[PlotJob]:
    """Every figure of ``plot_run``, in its order."""
    return ordered([*series_plot_jobs(robots, series), *follower_plot_jobs(robots, follower_series, followers)])


def draw_job(out_dir: Path, job: PlotJob, drawers: Mapping[str, Callable[..., Path]] | None = None) -> Path:
    """Draw one job into ``out_dir`` (created if needed); returns the PNG's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return (drawers or DRAWERS)[job.draw](out_dir / job.file, **job.args)


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
    return [draw_job(out_dir, job) for job in run_plot_jobs(robots, series, follower_series, followers)]


def _trajectories(path: Path, robots: Sequence[RobotSpec], series: Mapping[int, Series]) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    for r, color in zip(robots, palette(len(robots)), strict=False):
        s = series[r.id]
        ax.plot(s.cols["x"], s.cols["y"], lw=1.2, color=color, label=r.name)
    ax.set_xlabel("x east [m]")
    ax.set_ylabel("y north [m]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title("Trajectories (rear-axle reference point)")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(alpha=0.3)
    return save(fig, path)


def _speeds(path: Path, robots: Sequence[RobotSpec], series: Mapping[int, Series]) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for r, color in zip(robots, palette(len(robots)), strict=False):
        s = series[r.id]
        ax.plot(s.t_ns / 1e9, s.cols["v"], lw=1.2, color=color, label=r.name)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("speed [m/s]")
    ax.set_title("Speeds")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(alpha=0.3)
    return save(fig, path)


def _spacing_errors(path: Path, follower_series: Mapping[str, Mapping[str, np.ndarray]]) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    names = list(follower_series)
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
    return save(fig, path)


STRING_STABILITY_PANELS = (
    ("l2_spacing_error", "spacing error [m s^0.5]"),
    ("l2_lateral_deviation", "lateral deviation [m s^0.5]"),
    ("l2_speed_deviation", "speed deviation [m s^-0.5]"),
    ("l2_acceleration", "acceleration [m s^-1.5]"),
)
MAX_PLATOONS_DRAWN = 8


def _string_stability(path: Path, robots: Sequence[RobotSpec], followers: Mapping[str, Mapping[str, Any]]) -> Path:
    """L2 norm of each quantity against the position in the platoon, one line per platoon (log scale where the
    norms span a decade or more): a line that rises from follower to follower is amplification along the chain
    (ratio > 1)."""
    plt = pyplot()
    import matplotlib.ticker

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
    return save(fig, path)


def _estimate(path: Path, robots: Sequence[RobotSpec], series: Mapping[int, Series]) -> Path:
    """What each robot believed (odometry, fusion) against where it was: position error over time and paths."""
    plt = pyplot()
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
    return save(fig, path)


def save(fig: Any, path: Path) -> Path:
    """Lay out, write at 110 dpi and close a figure (every PNG of a run is written this way)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


DRAWERS: dict[str, Callable[..., Path]] = {
    "trajectories": _trajectories, "speeds": _speeds, "spacing_errors": _spacing_errors,
    "string_stability": _string_stability, "estimate": _estimate,
}
"""The drawing functions a ``PlotJob`` may name (a worker draws nothing else)."""
