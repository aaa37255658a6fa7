"""``comparison.html``: the platoon metrics side by side with their differences, the predecessor speed each
follower received against the truth, latency and inter-reception histograms, and every vehicle's path and speed
overlaid. Everything is drawn from the variants' run directories (``run.json`` and the Parquet traces)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..recording.safe_files import ensure_dir, write_atomic
from ..reporting.report import PLATOON_KEYS, image, page, platoon_table, table
from .compare_data import (
    V2X_COLUMNS,
    VEHICLE_COLUMNS,
    ages_of_information,
    chain,
    link_receptions,
    per_robot,
    read_trace,
    robot_specs,
)
from .compare_plots import (
    STYLE_NAMES,
    STYLES,
    plot_channel_figures,
    plot_histograms,
    plot_metric_bars,
    plot_overlay,
    plot_received_speed,
    variant_colors,
)


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
    palette = variant_colors(variants)  # one colour per channel kind, the same in every figure below
    bars = plot_metric_bars(plots_dir, comparison["summary"], variants, palette)
    if bars is not None:
        sections.append(("The headline metrics side by side (worst follower; colour per "
                         f"{'variant' if comparison['kind'] == 'story' else comparison['kind']})", image(bars)))
    robots = robot_specs(out / variants[0]) if (out / variants[0] / "scenario.resolved.yaml").exists() else []
    metrics = {c: comparison["runs"][c]["metrics"] for c in variants}
    first = metrics[variants[0]]
    colors = robot_colors([r.name for r in robots])  # the runs' own colours: one per robot, whatever the channel
    vehicles = {c: read_trace(out / c, "vehicles", VEHICLE_COLUMNS) for c in variants}
    series = {c: per_robot(t) for c, t in vehicles.items() if t is not None}
    links = chain(robots, first)
    if links:
        figures = plot_received_speed(plots_dir, series, links, colors, palette)
        sections.append((f"Predecessor speed as each follower received it, against the truth ({len(links)} links, "
                         "joiners' included; each while it existed)", figures_html(figures)))
        v2x = {c: read_trace(out / c, "v2x", V2X_COLUMNS) for c in variants}
        pairs = {(link.follower, link.predecessor) for link in links}
        pairs |= {(r.id, r.leader) for r in robots if r.leader is not None}
        received = {c: link_receptions(t, series.get(c, {}), pairs) for c, t in v2x.items() if t is not None}
        ages = {c: ages_of_information(series[c], {link.follower for link in links}) for c in variants
                if c in series}
        path = plot_channel_figures(plots_dir, received, ages, palette)
        if path:
            sections.append(("PDR against distance, inter-packet gap tail and age of information on the links the "
                             "controllers read", image(path)))
        path = plot_histograms(plots_dir, v2x, pairs, palette)
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
    if overlay is not None:  # after the metrics table and their bars
        at = 1 + (bars is not None) + (comparison["kind"] == "story")
        sections.insert(at, ("Trajectories and speeds of all vehicles: colour per robot, line style per "
                             f"{comparison['kind'] if comparison['kind'] != 'story' else 'variant'}", image(overlay)))
    styles = ", ".join(f"{c} {STYLE_NAMES[k % len(STYLES)]}" for k, c in enumerate(variants))
    swatches = " ".join(f"<span style='color:{palette[c]}'>&#9632;</span>&nbsp;{html.escape(c)}" for c in variants)
    meta = (f"scenario <b>{html.escape(str(comparison['scenario']))}</b> · seed {comparison['seed']} · "
            f"{comparison['kind']}: {html.escape(', '.join(variants))} · robots are named as in the scenario; "
            f"line styles: {html.escape(styles)} · colours: {swatches}")
    title = (f"coopsim demo: {' vs '.join(variants)}" if comparison["kind"] == "story"
             else f"coopsim: {comparison['kind']} comparison")
    write_atomic(out / "comparison.html", page(title, sections, meta))


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
