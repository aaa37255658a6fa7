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

from core.robots import RobotSpec
from orchestrator.recording.safe_files import ensure_dir, save_figure

from .roles_layout import platoon_groups, role_labels, roles_change, string_chains, timeline_args

if TYPE_CHECKING:
    from orchestrator.metrics import Series

MAX_ROBOTS_DRAWN = 240
"""Robots whose samples a run sends to be drawn at most (``MAX_PLATOON_PANELS`` platoons of ``MAX_PANEL_ROBOTS``):
a plot of 1,000 lines shows nothing."""


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
    """The robots the series figures draw: those of the first platoon panels (``_panels``), at most
    ``MAX_ROBOTS_DRAWN``."""
    drawn, _ = panels(platoon_groups(robots), {r.name for r in robots if r.id in series})
    names = {n for _, group in drawn for n in group}
    return [r for r in robots if r.name in names][:MAX_ROBOTS_DRAWN]


ROBOT_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)
"""The robots' colours, in the order the run spawns them: ten strong ones, then their light variants (a platoon of
up to twenty is distinct; robot 21 takes robot 1's colour again, in another platoon's panel)."""
PLATOON_COLORS = ("#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69", "#fccde5", "#d9d9d9",
                  "#bc80bd", "#ccebc5", "#ffed6f")
"""Platoon colours of the roles timeline (pastel, so the black labels and the hatching of maneuvers stay legible)."""
MAX_PLATOON_PANELS = 12
"""Platoons drawn as panels of one figure at most (the tables and the interactive charts cover every robot)."""
MAX_PANEL_ROBOTS = len(ROBOT_COLORS)
"""Robots drawn in one platoon's panel at most: each keeps a colour of its own in the panel."""


def robot_colors(names: Sequence[str]) -> dict[str, str]:
    """One colour per robot for every figure and chart of a run (and every channel of a comparison): the robot's
    place in ``names``, the run's robots in spawn order, picks it, so a follower has the same colour in the speeds
    and in the spacing errors, whichever robots each figure draws."""
    return {name: ROBOT_COLORS[k % len(ROBOT_COLORS)] for k, name in enumerate(names)}


def palette(n: int) -> list[str]:
    """The first ``n`` robot colours (for lines that are not robots: variants, platoons)."""
    return [ROBOT_COLORS[k % len(ROBOT_COLORS)] for k in range(max(n, 1))]


def panels(groups: Sequence[tuple[str, Sequence[str]]], present: Any) -> tuple[list[tuple[str, list[str]]], str]:
    """The groups drawn as panels of a figure (robots that have data, at most ``MAX_PANEL_ROBOTS`` each, at most
    ``MAX_PLATOON_PANELS`` groups) and a note on what was left out (empty when nothing was)."""
    kept = [(label, [n for n in names if n in present]) for label, names in groups]
    kept = [(label, names) for label, names in kept if names]
    drawn = [(label, names[:MAX_PANEL_ROBOTS]) for label, names in kept[:MAX_PLATOON_PANELS]]
    total, shown = sum(len(n) for _, n in kept), sum(len(n) for _, n in drawn)
    note = "" if shown == total else (f"{shown} of {total} robots drawn ({len(drawn)} of {len(kept)} platoons); "
                                      "the tables and interactive charts have every one")
    return drawn, note


def _legend(ax: Any, **kwargs: Any) -> None:
    """A legend at a fixed place, and only when something is labelled: matplotlib warns about an empty legend, and
    placing one at "best" is a search it warns about on a slow machine."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**{"loc": "upper right", "fontsize": 7, **kwargs})


def series_plot_jobs(robots: Sequence[RobotSpec], series: Mapping[int, Series],
                     roles: Mapping[str, Any] | None = None) -> list[PlotJob]:
    """The figures drawn from the vehicle samples alone (trajectories, speeds, the state estimate): they can be
    drawn while the metrics are computed. Only the drawn robots' samples are carried; the colours are every
    robot's (``robot_colors``), so the late figures give each robot the same one. ``roles`` (``metrics.json``'s
    block) groups the speeds by the platoon each robot spent the longest time in."""
    drawn = _drawn(robots, series)
    carried = {r.id: series[r.id] for r in drawn}
    colors = robot_colors([r.name for r in robots])
    _, note = panels(platoon_groups(robots, roles), {r.name for r in robots if r.id in series})
    look = {"robots": drawn, "series": carried, "colors": colors}
    jobs = [PlotJob("trajectories.png", "trajectories", look),
            PlotJob("speeds.png", "speeds", {**look, "groups": platoon_groups(drawn, roles), "note": note})]
    estimated = [r for r in drawn if not np.array_equal(series[r.id].cols["est_x"], series[r.id].cols["x"])]
    if estimated:
        jobs.append(PlotJob("estimate_vs_truth.png", "estimate", {**look, "robots": estimated}))
    return jobs


def follower_plot_jobs(robots: Sequence[RobotSpec], follower_series: Mapping[str, Mapping[str, np.ndarray]],
                       followers: Mapping[str, Mapping[str, Any]] | None = None,
                       metrics: Mapping[str, Any] | None = None) -> list[PlotJob]:
    """The figures drawn from the follower metrics: spacing errors (grouped by the platoon each follower spent
    the longest time in), string stability with followers beyond the first, and, given ``metrics`` with
    ``roles``, the roles timeline."""
    metrics = metrics or {}
    groups = platoon_groups(robots, metrics.get("roles"))
    drawn, note = panels(groups, follower_series)
    names = [n for _, group in drawn for n in group]
    jobs = []
    if names:  # a run without followers has no spacing error to draw
        jobs.append(PlotJob("spacing_errors.png", "spacing_errors", {
            "follower_series": {n: follower_series[n] for n in names}, "colors": robot_colors([r.name for r in robots]),
            "groups": drawn, "note": note}))
    if followers and any(pos >= 2 for _, members in string_chains(robots, followers) for pos, _ in members):
        jobs.append(PlotJob("string_stability.png", "string_stability",
                            {"robots": list(robots), "followers": followers}))
    if roles_change(metrics.get("roles")):  # a platoon that never changes needs no timeline
        jobs.append(PlotJob("roles_timeline.png", "roles_timeline", timeline_args(robots, metrics)))
    return jobs


def ordered(jobs: Sequence[PlotJob]) -> list[PlotJob]:
    """The jobs in the order ``plot_run`` has always returned its files (the report shows them in this order)."""
    rank = {name: k for k, name in enumerate(("trajectories.png", "speeds.png", "spacing_errors.png",
                                              "string_stability.png", "estimate_vs_truth.png",
                                              "roles_timeline.png"))}
    return sorted(jobs, key=lambda job: rank.get(job.file, len(rank)))


def run_plot_jobs(robots: Sequence[RobotSpec], series: Mapping[int, Series],
                  follower_series: Mapping[str, Mapping[str, np.ndarray]],
                  followers: Mapping[str, Mapping[str, Any]] | None = None,
                  metrics: Mapping[str, Any] | None = None) -> list[PlotJob]:
    """Every figure of ``plot_run``, in its order."""
    return ordered([*series_plot_jobs(robots, series, (metrics or {}).get("roles")),
                    *follower_plot_jobs(robots, follower_series, followers, metrics)])


def draw_job(out_dir: Path, job: PlotJob, drawers: Mapping[str, Callable[..., Path]] | None = None) -> Path:
    """Draw one job into ``out_dir`` (created if needed); returns the PNG's path."""
    ensure_dir(out_dir)  # a link in its place is refused: nothing is drawn outside the run directory
    return (drawers or DRAWERS)[job.draw](out_dir / job.file, **job.args)


def plot_run(
    out_dir: Path,
    robots: Sequence[RobotSpec],
    series: Mapping[int, Series],
    follower_series: Mapping[str, Mapping[str, np.ndarray]],
    followers: Mapping[str, Mapping[str, Any]] | None = None,
    metrics: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write trajectories.png, speeds.png, spacing_errors.png and, given the per-follower metrics,
    string_stability.png (and roles_timeline.png given ``metrics`` with roles); returns their paths."""
    ensure_dir(out_dir)
    return [draw_job(out_dir, job) for job in run_plot_jobs(robots, series, follower_series, followers, metrics)]


def _trajectories(path: Path, robots: Sequence[RobotSpec], series: Mapping[int, Series],
                  colors: Mapping[str, str] | None = None) -> Path:
    plt = pyplot()
    colors = colors or robot_colors([r.name for r in robots])
    fig, ax = plt.subplots(figsize=(7, 5))
    for r in robots:
        s = series[r.id]
        ax.plot(s.cols["x"], s.cols["y"], lw=1.2, color=colors[r.name], label=r.name)
    ax.set_xlabel("x east [m]")
    ax.set_ylabel("y north [m]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title("Trajectories (rear-axle reference point)")
    if len(robots) <= MAX_PANEL_ROBOTS:  # beyond, the speed panels name the colours platoon by platoon
        _legend(ax, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)
    return save(fig, path)


def _grid(plt: Any, panels: int, columns: int, width: float, height: float) -> tuple[Any, list[Any]]:
    """A figure of ``panels`` axes, ``columns`` wide, sharing the time axis; the unused axes hidden."""
    cols = min(columns, panels)
    rows = -(-panels // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width, height * rows), sharex=True, squeeze=False)
    for ax in list(axes.flat)[panels:]:
        ax.set_visible(False)
    return fig, list(axes.flat)[:panels]


def _speeds(path: Path, robots: Sequence[RobotSpec], series: Mapping[int, Series],
            colors: Mapping[str, str] | None = None, groups: Sequence[tuple[str, Sequence[str]]] = (),
            note: str = "") -> Path:
    """Speeds over time, one panel per platoon (small multiples: within a panel every robot has a colour of its
    own, and a platoon reads as one chain)."""
    plt = pyplot()
    colors = colors or robot_colors([r.name for r in robots])
    by_name = {r.name: r for r in robots}
    groups = [(label, [n for n in names if n in by_name]) for label, names in groups or [("", list(by_name))]]
    groups = [(label, names) for label, names in groups if names]
    fig, axes = _grid(plt, len(groups), 1 if len(groups) == 1 else 2, 7 if len(groups) == 1 else 11, 3.2)
    for ax, (label, names) in zip(axes, groups, strict=True):
        for name in names:
            s = series[by_name[name].id]
            ax.plot(s.t_ns / 1e9, s.cols["v"], lw=1.2, color=colors[name], label=name)
        ax.set_ylabel("speed [m/s]")
        ax.ticklabel_format(axis="y", useOffset=False)  # a platoon at constant speed reads 1.0, not 1e-12 + 1
        ax.set_title(label or "Speeds", fontsize=10)
        ax.grid(alpha=0.3)
        _legend(ax, ncol=2 if len(names) > 6 else 1, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    for ax in axes[-2:] if len(axes) > 1 else axes:
        ax.set_xlabel("time [s]")
    if len(groups) > 1:
        fig.suptitle("Speeds, one panel per platoon" + (f" ({note})" if note else ""), fontsize=11)
    return save(fig, path)


def _spacing_errors(path: Path, follower_series: Mapping[str, Mapping[str, np.ndarray]],
                    colors: Mapping[str, str] | None = None, groups: Sequence[tuple[str, Sequence[str]]] = (),
                    note: str = "") -> Path:
    """Spacing error and lateral deviation over time, one row of two panels per platoon."""
    plt = pyplot()
    colors = colors or robot_colors(list(follower_series))
    groups = [(label, [n for n in names if n in follower_series]) for label, names in
              groups or [("", list(follower_series))]]
    groups = [(label, names) for label, names in groups if names]
    fig, axes = plt.subplots(len(groups), 2, figsize=(12, 2.8 * len(groups) + 0.6), sharex=True, squeeze=False)
    for (ax_e, ax_l), (label, names) in zip(axes, groups, strict=True):
        for name in names:
            fs = follower_series[name]
            ax_e.plot(fs["t_s"], fs["spacing_error_m"], lw=1.2, color=colors[name], label=name)
            ax_l.plot(fs["t_s"], fs["lateral_m"], lw=1.2, color=colors[name], label=name)
        prefix = f"{label}: " if label else ""
        ax_e.set_title(f"{prefix}spacing error (gap - desired gap)", fontsize=10)
        ax_l.set_title(f"{prefix}lateral deviation from the predecessor's path", fontsize=10)
        ax_e.set_ylabel("spacing error [m]")
        ax_l.set_ylabel("lateral deviation [m]")
        for ax in (ax_e, ax_l):
            ax.grid(alpha=0.3)
        _legend(ax_l, ncol=2 if len(names) > 6 else 1, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    for ax in axes[-1]:
        ax.set_xlabel("time [s]")
    fig.suptitle("Spacing error and lateral deviation of each follower (gaps while degraded to ACC are left out)"
                 + (f"; {note}" if note else ""), fontsize=10)
    return save(fig, path)


PHASE_HATCH = {"maneuver": "////", "cut_in": "xxxx"}
"""How the roles timeline marks the phases that are not steady following."""


def _roles_timeline(path: Path, rows: Mapping[str, Sequence[Mapping[str, Any]]],
                    marks: Sequence[tuple[float, str]] = (), platoons: Sequence[str] = (), note: str = "") -> Path:
    """Per robot a bar over time, one piece per role interval: coloured by platoon, labelled with the position
    and the predecessor (L: leader), hatched during a maneuver (////) or a cut-in (xxxx); the maneuver requests
    and cut-ins as dotted lines."""
    plt = pyplot()
    from matplotlib.patches import Patch

    colour = {p: PLATOON_COLORS[k % len(PLATOON_COLORS)] for k, p in enumerate(platoons)}
    names = list(rows)
    t_end = max((float(r["to_s"]) for rs in rows.values() for r in rs), default=1.0)
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.42 * len(names)))
    for y, name in enumerate(names):
        for r in rows[name]:
            start, width = float(r["from_s"]), float(r["to_s"]) - float(r["from_s"])
            ax.broken_barh([(start, width)], (y - 0.38, 0.76), facecolors=colour.get(str(r["platoon"]), "#eeeeee"),
                           edgecolors="#555555", linewidth=0.3, hatch=PHASE_HATCH.get(str(r["phase"])))
        for start, end, text in role_labels(rows[name]):
            if (end - start) / t_end * 110 > len(text) * 0.9:  # about 110 characters fit across the axes
                ax.text((start + end) / 2, y, text, ha="center", va="center", fontsize=7)
    for t, text in marks:
        ax.axvline(t, color="#333333", lw=0.8, ls=":")
        ax.text(t, -0.7, text, fontsize=7, rotation=0, ha="left", va="bottom")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_ylim(len(names) - 0.5, -1.0)
    ax.set_xlim(0, t_end)
    ax.set_xlabel("time [s]")
    ax.grid(alpha=0.3, axis="x")
    handles = [Patch(facecolor=colour[p], edgecolor="#555555", label=f"platoon {p}") for p in platoons]
    handles += [Patch(facecolor="white", edgecolor="#555555", hatch=h, label=phase.replace("_", "-"))
                for phase, h in PHASE_HATCH.items()]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("Roles over time: position · predecessor (L: leader of the platoon)"
                 + (f"; {note}" if note else ""), fontsize=10)
    return save(fig, path)


STRING_STABILITY_PANELS = (
    ("l2_spacing_error", "spacing error [m s^0.5]"),
    ("l2_lateral_deviation", "lateral deviation [m s^0.5]"),
    ("l2_speed_deviation", "speed deviation [m s^-0.5]"),
    ("l2_acceleration", "acceleration [m s^-1.5]"),
)
def _string_stability(path: Path, robots: Sequence[RobotSpec], followers: Mapping[str, Mapping[str, Any]]) -> Path:
    """L2 norm of each quantity against the position in the platoon, one line per platoon (log scale where the
    norms span a decade or more): a line that rises from follower to follower is amplification along the chain
    (ratio > 1)."""
    plt = pyplot()
    import matplotlib.ticker

    fig, axes = plt.subplots(2, 2, figsize=(10, 6.5))
    chains = string_chains(robots, followers)
    for (key, label), ax in zip(STRING_STABILITY_PANELS, axes.flat, strict=True):
        values = []
        for platoon, members in chains:
            rows = [(pos, followers[name].get(key)) for pos, name in members]
            rows = [(pos, val) for pos, val in rows if val is not None and val > 0]
            if rows:
                pos, val = zip(*sorted(rows), strict=True)
                ax.plot(pos, val, "o-", lw=1.2, ms=4, label=platoon)
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
    if len(chains) > 1:
        _legend(axes.flat[0], ncol=2)
    fig.suptitle("String stability along the chain: rising lines amplify", fontsize=11)
    return save(fig, path)


def _estimate(path: Path, robots: Sequence[RobotSpec], series: Mapping[int, Series],
              colors: Mapping[str, str] | None = None) -> Path:
    """What each robot believed (odometry, fusion) against where it was: position error over time and paths."""
    plt = pyplot()
    colors = colors or robot_colors([r.name for r in robots])
    fig, (ax_err, ax_xy) = plt.subplots(1, 2, figsize=(11, 4.5))
    for r in robots:
        s = series[r.id]
        color = colors[r.name]
        error = np.hypot(s.cols["est_x"] - s.cols["x"], s.cols["est_y"] - s.cols["y"])
        ax_err.plot(s.t_ns / 1e9, error, color=color, lw=1.2, label=r.name)
        ax_xy.plot(s.cols["x"], s.cols["y"], color=color, lw=1.2)
        ax_xy.plot(s.cols["est_x"], s.cols["est_y"], "--", color=color, lw=1.0)
    ax_err.set_xlabel("time [s]")
    ax_err.set_ylabel("|estimate - truth| [m]")
    ax_err.set_title("Position error of the state estimate")
    ax_xy.set_xlabel("x east [m]")
    ax_xy.set_ylabel("y north [m]")
    ax_xy.set_aspect("equal", adjustable="datalim")
    ax_xy.set_title("Estimate (dashed) vs truth (solid)")
    for ax in (ax_err, ax_xy):
        ax.grid(alpha=0.3)
    if len(robots) <= MAX_PANEL_ROBOTS:
        _legend(ax_err, ncol=2, loc="upper left")
    return save(fig, path)


def save(fig: Any, path: Path) -> Path:
    """Lay out, write at 110 dpi and close a figure (every PNG of a run is written this way: whole or not at all,
    never through a link)."""
    fig.tight_layout()
    try:
        save_figure(fig, path)
    finally:
        pyplot().close(fig)
    return path


DRAWERS: dict[str, Callable[..., Path]] = {
    "trajectories": _trajectories, "speeds": _speeds, "spacing_errors": _spacing_errors,
    "string_stability": _string_stability, "estimate": _estimate, "roles_timeline": _roles_timeline,
}
"""The drawing functions a ``PlotJob`` may name (a worker draws nothing else)."""
