"""``comparison.html``: the platoon metrics side by side with their differences, the predecessor speed each
follower received against the truth, latency and inter-reception histograms, and every vehicle's path and speed
overlaid. Everything is drawn from the variants' run directories (``run.json`` and the Parquet traces)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.robots import RobotSpec

from ..recording.safe_files import ensure_dir, save_figure, write_atomic
from ..reporting.report import PLATOON_KEYS, image, page, platoon_table, table

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


MAX_PANELS = 12
"""Received-speed panels in one figure at most; more links go in more figures (every link is drawn)."""


@dataclass(frozen=True)
class Link:
    """A follower and its predecessor while the link existed, by name and station id (names everywhere, ids where
    the radio speaks)."""

    platoon: str
    follower: int
    predecessor: int
    follower_name: str
    predecessor_name: str
    from_s: float = 0.0
    to_s: float = float("inf")


def robot_specs(run_dir: Path) -> list[RobotSpec]:
    """The robots of a variant's run directory (from its resolved scenario)."""
    from ..metrics import RunData

    return RunData.load(run_dir).robots


def chain(robots: Sequence[RobotSpec], metrics: Mapping[str, Any] | None = None) -> list[Link]:
    """Every link of the run, joiners' included, grouped by platoon: each follower's predecessors over time from
    ``metrics.json`` (``followers[name].following``, by the platoon it spent the longest time in); without them
    (an old run directory) the predecessors as spawned."""
    from ..reporting.roles_layout import platoon_groups

    ids = {r.name: r.id for r in robots}
    followers = (metrics or {}).get("followers") or {}
    links: list[Link] = []
    for platoon, names in platoon_groups(robots, (metrics or {}).get("roles")):
        for name in names:
            stretches = (followers.get(name) or {}).get("following")
            if stretches is None:
                r = next(r for r in robots if r.name == name)
                spawned = next((p.name for p in robots if p.id == r.predecessor), None)
                stretches = [] if spawned is None else [{"predecessor": spawned, "from_s": 0.0, "to_s": float("inf")}]
            for k in stretches:
                pred = str(k["predecessor"])
                if pred in ids:
                    links.append(Link(platoon, ids[name], ids[pred], name, pred, float(k["from_s"]),
                                      float(k["to_s"])))
    return links


def write_comparison_html(out: Path, comparison: dict[str, Any], follower_keys: Sequence[str]) -> None:
    """Write comparison.html (plots under ``out/plots``) for what ``compare`` returned."""
    from ..reporting.plots import robot_colors
    from ..reporting.report import link_rows, maneuver_section
    from ..reporting.roles_layout import platoon_groups

    variants = comparison["variants"]
    plots_dir = ensure_dir(out / "plots")
    sections = []
    rows = {k: {c: v.get(c) for c in variants} for k, v in comparison["summary"].items()}
    for key, diff in comparison["differences"].items():
        for c, d in diff.items():
            rows[key][f"{c} - {variants[0]}"] = d
    columns = [*variants, *(f"{c} - {variants[0]}" for c in variants[1:])]
    sections.append(("Platoon metrics (worst follower of every platoon)", table(rows, columns, first="metric")))
    robots = robot_specs(out / variants[0]) if (out / variants[0] / "scenario.resolved.yaml").exists() else []
    metrics = {c: comparison["runs"][c]["metrics"] for c in variants}
    first = metrics[variants[0]]
    colors = robot_colors([r.name for r in robots])  # the runs' own colours: one per robot, whatever the channel
    vehicles = {c: read_trace(out / c, "vehicles", VEHICLE_COLUMNS) for c in variants}
    series = {c: per_robot(t) for c, t in vehicles.items() if t is not None}
    links = chain(robots, first)
    if links:
        figures = plot_received_speed(plots_dir, series, links, colors)
        sections.append((f"Predecessor speed as each follower received it, against the truth ({len(links)} links, "
                         "joiners' included; each while it existed)", figures_html(figures)))
        v2x = {c: read_trace(out / c, "v2x", V2X_COLUMNS) for c in variants}
        pairs = {(link.follower, link.predecessor) for link in links}
        pairs |= {(r.id, r.leader) for r in robots if r.leader is not None}
        path = plot_histograms(plots_dir, v2x, pairs)
        if path:
            sections.append(("Latency and inter-reception time of every link the controllers read", image(path)))
    for c in variants:
        timeline = out / c / "plots" / "roles_timeline.png"
        body = maneuver_section(metrics[c], timeline if timeline.exists() else None)
        if body:
            sections.append((f"Maneuvers and roles, {variant_label(comparison['kind'], c)}", body))
    if robots:
        for c in variants:
            followers = metrics[c].get("followers", {})
            sections.append((f"Per platoon, {variant_label(comparison['kind'], c)} (worst follower)",
                             table(platoon_table(robots, followers), PLATOON_KEYS, first="platoon")))
    for c in variants:
        followers = metrics[c].get("followers", {})
        cols = [k for k in follower_keys if any(f.get(k) is not None for f in followers.values())]
        sections.append((f"Followers, {variant_label(comparison['kind'], c)}", table(followers, cols)))
    link_table = link_columns(variants, {c: link_rows(metrics[c].get("followers", {})) for c in variants})
    if link_table:
        sections.append(("Every link while it existed: PDR and latency per channel",
                         table(link_table, list(next(iter(link_table.values()))), first="follower")))
    if comparison["kind"] == "story":
        sections.insert(0, ("What each difference comes from", explain_story(comparison)))
    groups = platoon_groups(robots, first.get("roles"))
    overlay = plot_overlay(plots_dir, series, {r.id: r.name for r in robots}, colors, groups)
    if overlay is not None:
        sections.insert(1, ("Trajectories and speeds of all vehicles: colour per robot, line style per "
                            f"{comparison['kind'] if comparison['kind'] != 'story' else 'variant'}", image(overlay)))
    styles = ", ".join(f"{c} {STYLE_NAMES[k % len(STYLES)]}" for k, c in enumerate(variants))
    meta = (f"scenario <b>{html.escape(str(comparison['scenario']))}</b> · seed {comparison['seed']} · "
            f"{comparison['kind']}: {html.escape(', '.join(variants))} · robots are named as in the scenario; "
            f"line styles: {html.escape(styles)}")
    title = (f"coopsim demo: {' vs '.join(variants)}" if comparison["kind"] == "story"
             else f"coopsim: {comparison['kind']} comparison")
    write_atomic(out / "comparison.html", page(title, sections, meta))


STYLES = ("-", "--", ":", "-.")
"""Line style per variant (the colour is the robot's)."""
STYLE_NAMES = ("solid", "dashed", "dotted", "dash-dot")


def link_columns(variants: Sequence[str], rows: Mapping[str, Mapping[str, Mapping[str, Any]]]
                 ) -> dict[str, dict[str, Any]]:
    """The links of every variant side by side: predecessor, interval, and each variant's PDR and mean latency
    (a link that exists in one variant only has its values there)."""
    out: dict[str, dict[str, Any]] = {}
    for c in variants:
        for key, row in rows[c].items():
            entry = out.setdefault(key, {"predecessor": row.get("predecessor"), "from_s": row.get("from_s"),
                                         "to_s": row.get("to_s")})
            entry[f"pdr {c}"] = row.get("pdr")
            entry[f"latency_mean_s {c}"] = row.get("latency_mean_s")
    if not any(row.get(f"pdr {c}") is not None for row in out.values() for c in variants):
        return {}
    return {k: {c: row.get(c) for c in ["predecessor", "from_s", "to_s", *(f"pdr {c}" for c in variants),
                                         *(f"latency_mean_s {c}" for c in variants)]} for k, row in out.items()}


def figures_html(figures: Sequence[tuple[str, Path]]) -> str:
    """Figures one below the other, each folded under its title but the first (a page of 200 robots stays short,
    and every figure is one click away)."""
    parts = []
    for k, (title, path) in enumerate(figures):
        parts.append(f"<details{' open' if k == 0 else ''}><summary>{html.escape(title)}</summary>"
                     f"{image(path)}</details>")
    return "".join(parts)


def variant_label(kind: str, variant: str) -> str:
    """How a page names a variant: "channel itsg5", "fidelity full", or the demo's own names."""
    return variant if kind == "story" else f"{kind} {variant}"


def explain_story(comparison: dict[str, Any]) -> str:
    """One paragraph (HTML) on where the differences between the demo's variants come from: rate, delay,
    quantisation and loss, with this run's own numbers."""
    summary = comparison["summary"]

    def value(key: str, variant: str) -> float | None:
        return (summary.get(key) or {}).get(variant)

    def num(x: float | None, unit: str = "", scale: float = 1.0, digits: str = ".3g") -> str:
        return "-" if x is None else f"{x * scale:{digits}}{unit}"

    ideal, raw, predicted = (value("spacing_error_rms_m", v) for v in ("ideal", "itsg5", "itsg5_predicted"))
    won = None if raw is None or predicted is None else raw - predicted
    left = None if predicted is None or ideal is None else predicted - ideal
    text = (
        f"<p>The <b>ideal</b> channel hands each follower its predecessor's exact state every step "
        f"({num(value('interval_mean_s', 'ideal'), ' s')} apart, no delay): spacing error RMS "
        f"{num(ideal, ' m')}. <b>ITS-G5</b> sends CAMs as the standard generates them (EN 302 637-2: when the "
        f"heading, position or speed changed enough, at least once per second): one every "
        f"{num(value('interval_mean_s', 'itsg5'), ' s')} on average (the <i>rate</i>), each "
        f"{num(value('latency_mean_s', 'itsg5'), ' ms', 1e3)} late on average (the <i>delay</i>: queueing, "
        f"channel access and processing), rounded to the CAM's units (the <i>quantisation</i>: 0.01 m/s, 0.1 deg "
        f"of heading, 0.1 m/s^2), and a worst-link PDR of {num(value('pdr', 'itsg5'))} (the <i>loss</i>). The "
        f"controller then acts on data {num(value('aoi_mean_s', 'itsg5'), ' s')} old on average, and the spacing "
        f"error RMS is {num(raw, ' m')}.</p>"
        f"<p><b>ITS-G5 with prediction</b> (<code>controller.predict: ctrv</code>) moves each received state "
        f"forward to the control instant with the sender's own speed and yaw rate: spacing error RMS "
        f"{num(predicted, ' m')}. What prediction wins back ({num(won, ' m')}) is the cost of the low rate and "
        f"the delay; what remains against the ideal channel ({num(left, ' m')}) is what prediction cannot know "
        f"(the predecessor's changes since its last CAM), quantisation and loss. The channel is not bad: the "
        f"standard sends rarely when little changes, and a controller that uses the messages as they are pays "
        f"for their age. (Each figure is the worst follower's.)</p>"
    )
    return text


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
                        colors: Mapping[str, str] | None = None) -> list[tuple[str, Path]]:
    """One panel per link while it existed, ``MAX_PANELS`` to a figure, a figure per platoon (or part of one): the
    predecessor's true speed (wide, pale) and the speed the follower's controller held (a staircase: delay,
    update rate and quantisation), in the predecessor's colour, one line style per variant. Returns (title, path)
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
                    if link.predecessor in s:
                        pred = s[link.predecessor]
                        t = pred["t_ns"] / 1e9
                        keep = (t >= link.from_s) & (t <= link.to_s)
                        ax.plot(t[keep], pred["v"][keep], style, color=color, lw=2.5, alpha=0.3,
                                label=f"truth ({c} run)")
                    if link.follower in s and "pred_v" in s[link.follower]:
                        f = s[link.follower]
                        t = f["t_ns"] / 1e9
                        keep = (t >= link.from_s) & (t <= link.to_s)
                        ax.step(t[keep], f["pred_v"][keep], style, where="post", color=color, lw=1.0,
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


def plot_histograms(plots_dir: Path, v2x: dict[str, Columns | None], pairs: set[tuple[int, int]]) -> Path | None:
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
            if len(values):  # variants by line style, as in every figure of the page
                ax.step(values, np.arange(1, len(values) + 1) / len(values), style, where="post", color="#333333",
                        label=f"{c} ({len(values):,})")
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


__all__ = ["Link", "chain", "per_robot", "plot_histograms", "plot_overlay", "plot_received_speed",
           "read_trace", "write_comparison_html"]
