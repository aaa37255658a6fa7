"""``comparison.html``: the platoon metrics side by side with their differences, the predecessor speed each
follower received against the truth, latency and inter-reception histograms, and every vehicle's path and speed
overlaid. Everything is drawn from the variants' run directories (``run.json`` and the Parquet traces)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..report import image, page, table

Columns = dict[str, np.ndarray]
VEHICLE_COLUMNS = ("t_ns", "robot", "x", "y", "v", "pred_v")
V2X_COLUMNS = ("t_ns", "event", "sender", "receiver", "outcome", "latency_s")


def read_trace(run_dir: Path, name: str, columns: Sequence[str]) -> Columns | None:
    """The given columns of ``trace/<name>.parquet`` (those it has) as numpy arrays, text as object arrays;
    None when the run wrote no such trace."""
    path = Path(run_dir) / "trace" / f"{name}.parquet"
    if not path.exists():
        return None
    present = set(pq.read_schema(path).names)
    tbl = pq.read_table(path, columns=[c for c in columns if c in present])
    out = {}
    for col in tbl.column_names:
        data = tbl.column(col)
        if pa.types.is_dictionary(data.type) or pa.types.is_string(data.type):
            out[col] = np.asarray(data.cast(pa.string()).to_pylist(), dtype=object)
        else:
            out[col] = data.to_numpy()
    return out


def per_robot(trace: Columns) -> dict[int, Columns]:
    """The rows of a vehicles trace grouped by robot, each sorted by time."""
    order = np.lexsort((trace["t_ns"], trace["robot"]))
    robots = trace["robot"][order]
    out: dict[int, Columns] = {}
    for rows in np.split(order, np.flatnonzero(np.diff(robots)) + 1):
        if len(rows):
            out[int(trace["robot"][rows[0]])] = {k: np.asarray(v)[rows] for k, v in trace.items() if k != "robot"}
    return out


def chain(run: dict[str, Any], n: int = 3) -> list[tuple[int, int]]:
    """(follower, predecessor) ids along the first platoon, up to ``n`` links."""
    ids = sorted(int(k) for k in run.get("robot_names", {}))
    return [(ids[i], ids[i - 1]) for i in range(1, min(len(ids), n + 1))]


def write_comparison_html(out: Path, comparison: dict[str, Any], follower_keys: Sequence[str]) -> None:
    """Write comparison.html (plots under ``out/plots``) for what ``compare`` returned."""
    variants = comparison["variants"]
    plots_dir = out / "plots"
    plots_dir.mkdir(exist_ok=True)
    sections = []
    rows = {k: {c: v.get(c) for c in variants} for k, v in comparison["summary"].items()}
    for key, diff in comparison["differences"].items():
        for c, d in diff.items():
            rows[key][f"{c} - {variants[0]}"] = d
    columns = [*variants, *(f"{c} - {variants[0]}" for c in variants[1:])]
    sections.append(("Platoon metrics (worst follower)", table(rows, columns, first="metric")))
    vehicles = {c: read_trace(out / c, "vehicles", VEHICLE_COLUMNS) for c in variants}
    series = {c: per_robot(t) for c, t in vehicles.items() if t is not None}
    links = chain(comparison["runs"][variants[0]]["run"])
    if links:
        path = plot_received_speed(plots_dir, series, links)
        sections.append(("Predecessor speed as each follower received it, against the truth", image(path)))
        follower, leader = links[0]
        v2x = {c: read_trace(out / c, "v2x", V2X_COLUMNS) for c in variants}
        path = plot_histograms(plots_dir, v2x, follower, leader)
        if path:
            sections.append(("Latency and inter-reception interval (leader -> first follower)", image(path)))
    for c in variants:
        followers = comparison["runs"][c]["metrics"].get("followers", {})
        cols = [k for k in follower_keys if any(f.get(k) is not None for f in followers.values())]
        sections.append((f"Followers with channel {c}", table(followers, cols)))
    overlay = plot_overlay(plots_dir, series)
    if overlay is not None:
        sections.insert(1, ("Trajectories and speeds of all vehicles, overlaid", image(overlay)))
    meta = (f"scenario <b>{comparison['scenario']}</b> · seed {comparison['seed']} · "
            f"{comparison['kind']}: {', '.join(variants)}")
    title = f"coopsim: {comparison['kind']} comparison"
    (out / "comparison.html").write_text(page(title, sections, meta), encoding="utf-8")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_overlay(plots_dir: Path, series: dict[str, dict[int, Columns]]) -> Path | None:
    """Every vehicle's path and speed, one line style per variant, one colour per robot."""
    if not series:
        return None
    plt = _pyplot()
    fig, (ax_xy, ax_v) = plt.subplots(1, 2, figsize=(11, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    for k, (variant, robots) in enumerate(series.items()):
        for j, (rid, s) in enumerate(sorted(robots.items())[:8]):
            color, style = colors[j % len(colors)], styles[k % len(styles)]
            label = f"robot {rid} ({variant})"
            ax_xy.plot(s["x"], s["y"], style, color=color, lw=1.1, label=label)
            ax_v.plot(s["t_ns"] / 1e9, s["v"], style, color=color, lw=1.1, label=label)
    ax_xy.set_xlabel("x east [m]")
    ax_xy.set_ylabel("y north [m]")
    ax_xy.set_aspect("equal", adjustable="datalim")
    ax_v.set_xlabel("time [s]")
    ax_v.set_ylabel("speed [m/s]")
    for ax in (ax_xy, ax_v):
        ax.grid(alpha=0.3)
    ax_v.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    path = plots_dir / "overlay_trajectories_speeds.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_received_speed(plots_dir: Path, series: dict[str, dict[int, Columns]],
                        links: list[tuple[int, int]]) -> Path:
    """One panel per link: the predecessor's true speed and the speed the follower's controller held, per
    variant (delay, update rate and quantisation steps show as the staircase)."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(links), 1, figsize=(8, 2.6 * len(links)), sharex=True, squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (follower, pred) in zip(axes[:, 0], links, strict=True):
        for k, (c, s) in enumerate(series.items()):
            color = colors[k % len(colors)]
            if pred in s:
                ax.plot(s[pred]["t_ns"] / 1e9, s[pred]["v"], color=color, lw=2.5, alpha=0.3,
                        label=f"truth ({c} run)")
            if follower in s and "pred_v" in s[follower]:
                f = s[follower]
                ax.step(f["t_ns"] / 1e9, f["pred_v"], where="post", color=color, lw=1.0, label=f"received via {c}")
        ax.set_ylabel(f"v of robot {pred} [m/s]", fontsize=8)
        ax.set_title(f"as received by robot {follower}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[-1, 0].set_xlabel("time [s]")
    fig.tight_layout()
    path = plots_dir / "received_predecessor_speed.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_histograms(plots_dir: Path, v2x: dict[str, Columns | None], follower: int, leader: int) -> Path | None:
    """Latency and interval between receptions from ``leader`` at ``follower``, one histogram per variant."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    drawn = False
    for c, trace in v2x.items():
        if trace is None:
            continue
        ok = (trace["event"] == "rx") & (trace["sender"] == leader) & (trace["receiver"] == follower) & (
            trace["outcome"] == "received")
        if not ok.any():
            continue
        latency = np.asarray(trace["latency_s"])[ok] * 1e3
        intervals = np.diff(np.sort(np.asarray(trace["t_ns"])[ok])) / 1e6
        axes[0].hist(latency, bins=40, alpha=0.6, label=c)
        axes[1].hist(intervals, bins=40, alpha=0.6, label=c)
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    axes[0].set_xlabel("latency [ms]")
    axes[1].set_xlabel("interval between receptions [ms]")
    for ax in axes:
        ax.set_ylabel("count")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = plots_dir / "latency_interval_histograms.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["chain", "per_robot", "plot_histograms", "plot_overlay", "plot_received_speed", "read_trace",
           "write_comparison_html"]
