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

from ..core.robots import RobotSpec
from ..report import PLATOON_KEYS, image, page, platoon_table, table

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
"""Received-speed panels drawn at most (one per link); the page says which links of how many it shows."""
LINKS_PER_PLATOON = 3


@dataclass(frozen=True)
class Link:
    """A follower and its predecessor, by name and station id (names everywhere, ids where the radio speaks)."""

    platoon: int
    follower: int
    predecessor: int
    follower_name: str
    predecessor_name: str


def robot_specs(run_dir: Path) -> list[RobotSpec]:
    """The robots of a variant's run directory (from its resolved scenario)."""
    from ..metrics import RunData

    return RunData.load(run_dir).robots


def chain(robots: Sequence[RobotSpec], per_platoon: int = LINKS_PER_PLATOON,
          panels: int = MAX_PANELS) -> tuple[list[Link], str]:
    """The first ``per_platoon`` links of every platoon (leader -> first follower first), at most ``panels`` in
    all, and a sentence saying what was left out (empty when nothing was)."""
    names = {r.id: r.name for r in robots}
    platoons: dict[int, list[Link]] = {}
    for r in robots:
        if r.predecessor is not None:
            platoons.setdefault(r.platoon, []).append(
                Link(r.platoon, r.id, r.predecessor, r.name, names.get(r.predecessor, str(r.predecessor))))
    links: list[Link] = []
    for members in platoons.values():
        links += members[:per_platoon]
    total = sum(len(m) for m in platoons.values())
    shown = links[:panels]
    if len(shown) == total:
        return shown, ""
    drawn_platoons = len({link.platoon for link in shown})
    return shown, (f"Showing {len(shown)} of {total} links: the first {per_platoon} of each platoon, "
                   f"{drawn_platoons} of {len(platoons)} platoons; every follower is in the tables below.")


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
    sections.append(("Platoon metrics (worst follower of every platoon)", table(rows, columns, first="metric")))
    robots = robot_specs(out / variants[0]) if (out / variants[0] / "scenario.resolved.yaml").exists() else []
    vehicles = {c: read_trace(out / c, "vehicles", VEHICLE_COLUMNS) for c in variants}
    series = {c: per_robot(t) for c, t in vehicles.items() if t is not None}
    links, left_out = chain(robots)
    if links:
        path = plot_received_speed(plots_dir, series, links)
        note = f"<p class='meta'>{html.escape(left_out)}</p>" if left_out else ""
        sections.append(("Predecessor speed as each follower received it, against the truth", note + image(path)))
        v2x = {c: read_trace(out / c, "v2x", V2X_COLUMNS) for c in variants}
        pairs = {(r.id, s) for r in robots for s in (r.predecessor, r.leader) if s is not None}
        path = plot_histograms(plots_dir, v2x, pairs)
        if path:
            sections.append(("Latency and inter-reception time of every link the controllers read", image(path)))
    if robots:
        for c in variants:
            followers = comparison["runs"][c]["metrics"].get("followers", {})
            sections.append((f"Per platoon, {variant_label(comparison['kind'], c)} (worst follower)",
                             table(platoon_table(robots, followers), PLATOON_KEYS, first="platoon")))
    for c in variants:
        followers = comparison["runs"][c]["metrics"].get("followers", {})
        cols = [k for k in follower_keys if any(f.get(k) is not None for f in followers.values())]
        sections.append((f"Followers, {variant_label(comparison['kind'], c)}", table(followers, cols)))
    if comparison["kind"] == "story":
        sections.insert(0, ("What each difference comes from", explain_story(comparison)))
    overlay = plot_overlay(plots_dir, series, {r.id: r.name for r in robots})
    if overlay is not None:
        sections.insert(1, ("Trajectories and speeds of all vehicles, overlaid", image(overlay)))
    meta = (f"scenario <b>{html.escape(str(comparison['scenario']))}</b> · seed {comparison['seed']} · "
            f"{comparison['kind']}: {html.escape(', '.join(variants))} · robots are named as in the scenario")
    title = (f"coopsim demo: {' vs '.join(variants)}" if comparison["kind"] == "story"
             else f"coopsim: {comparison['kind']} comparison")
    (out / "comparison.html").write_text(page(title, sections, meta), encoding="utf-8")


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


def plot_overlay(plots_dir: Path, series: dict[str, dict[int, Columns]],
                 names: Mapping[int, str] | None = None) -> Path | None:
    """Every vehicle's path and speed: one colour per robot from a continuous map (distinct with many robots),
    one line style per variant (the legend names the variants, the colour bar the robots)."""
    if not series:
        return None
    plt = _pyplot()
    names = names or {}
    fig, (ax_xy, ax_v) = plt.subplots(1, 2, figsize=(11, 4.5))
    styles = ["-", "--", ":", "-."]
    ids = sorted({rid for robots in series.values() for rid in robots})
    cmap = plt.get_cmap("turbo", max(len(ids), 2))
    color = {rid: cmap(j) for j, rid in enumerate(ids)}
    for k, (variant, robots) in enumerate(series.items()):
        style = styles[k % len(styles)]
        for rid, s in sorted(robots.items()):
            ax_xy.plot(s["x"], s["y"], style, color=color[rid], lw=1.0)
            ax_v.plot(s["t_ns"] / 1e9, s["v"], style, color=color[rid], lw=1.0)
        ax_v.plot([], [], style, color="k", label=variant)
    ax_xy.set_xlabel("x east [m]")
    ax_xy.set_ylabel("y north [m]")
    ax_xy.set_aspect("equal", adjustable="datalim")
    ax_v.set_xlabel("time [s]")
    ax_v.set_ylabel("speed [m/s]")
    for ax in (ax_xy, ax_v):
        ax.grid(alpha=0.3)
    ax_v.legend(fontsize=8, title="line style", title_fontsize=8)
    if len(ids) <= 12:
        for rid in ids:
            ax_xy.plot([], [], color=color[rid], label=names.get(rid, f"station {rid}"))
        ax_xy.legend(fontsize=7, ncol=2)
    else:
        bar = fig.colorbar(plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, len(ids) - 1)), ax=ax_v)
        bar.set_label(f"robot ({names.get(ids[0], ids[0])} .. {names.get(ids[-1], ids[-1])})", fontsize=8)
    fig.tight_layout()
    path = plots_dir / "overlay_trajectories_speeds.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_received_speed(plots_dir: Path, series: dict[str, dict[int, Columns]], links: Sequence[Link]) -> Path:
    """One panel per link, in a grid: the predecessor's true speed and the speed the follower's controller held,
    per variant (delay, update rate and quantisation steps show as the staircase)."""
    plt = _pyplot()
    cols = 1 if len(links) <= 3 else 2
    rows = -(-len(links) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(8 if cols == 1 else 12, 2.6 * rows), sharex=True, squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, link in zip(axes.flat, links, strict=False):
        for k, (c, s) in enumerate(series.items()):
            color = colors[k % len(colors)]
            if link.predecessor in s:
                pred = s[link.predecessor]
                ax.plot(pred["t_ns"] / 1e9, pred["v"], color=color, lw=2.5, alpha=0.3, label=f"truth ({c} run)")
            if link.follower in s and "pred_v" in s[link.follower]:
                f = s[link.follower]
                ax.step(f["t_ns"] / 1e9, f["pred_v"], where="post", color=color, lw=1.0, label=f"received via {c}")
        ax.set_ylabel(f"v of {link.predecessor_name} [m/s]", fontsize=8)
        ax.set_title(f"platoon {link.platoon}: {link.predecessor_name} as received by {link.follower_name}",
                     fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    for ax in list(axes.flat)[len(links):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("time [s]")
    fig.tight_layout()
    path = plots_dir / "received_predecessor_speed.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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
        for ax, values in ((axes[0], latency), (axes[1], intervals)):
            if len(values):
                ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post",
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
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    path = plots_dir / "latency_interval_histograms.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["Link", "chain", "per_robot", "plot_histograms", "plot_overlay", "plot_received_speed",
           "read_trace", "write_comparison_html"]
