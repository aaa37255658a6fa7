"""Self-contained HTML reports (plots embedded as base64 PNG, no external files or scripts)."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.recording.safe_files import write_atomic

from .misbehaviour_report import misbehaviour_section

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}h3{font-size:1em}
details{margin:.5em 0}summary{cursor:pointer;color:#335}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f3f3f3}
.tablewrap{max-width:100%;overflow-x:auto}
td:first-child,th:first-child{text-align:left}img{max-width:100%;margin:.5em 0}
.meta{color:#555;font-size:.9em}.bad{color:#b00}
.banner{background:#fde8e8;border:2px solid #b00;color:#700;padding:.6em 1em;margin:1em 0;font-weight:600}
.banner ul{margin:.3em 0 0 1.2em;padding:0;font-weight:normal}
"""


def fmt(value: Any) -> str:
    """A number for a table: 4 significant digits, '-' for missing."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


def table(rows: Mapping[str, Mapping[str, Any]], columns: Sequence[str], first: str = "robot") -> str:
    """HTML table: one row per key of ``rows``, the given columns."""
    head = "".join(f"<th>{html.escape(c).replace('_', '_<wbr>')}</th>" for c in (first, *columns))
    body = "".join(
        "<tr>" + f"<td>{html.escape(name)}</td>" + "".join(f"<td>{fmt(row.get(c))}</td>" for c in columns) + "</tr>"
        for name, row in rows.items()
    )
    # headers may wrap after each underscore (metric names are long) and a table wider than the page scrolls inside its
    # own box, so the page itself never scrolls sideways
    return f"<div class='tablewrap'><table><tr>{head}</tr>{body}</table></div>"


def image(path: Path, alt: str = "") -> str:
    """An <img> with the PNG embedded."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(alt or path.stem)}" src="data:image/png;base64,{data}">'


def page(title: str, sections: Iterable[tuple[str, str]], meta: str = "", banner: str = "") -> str:
    """A whole HTML document from (heading, html) sections; ``banner`` (HTML) goes above everything else."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    if banner:
        parts.append(f"<div class='banner' role='alert'>{banner}</div>")
    if meta:
        parts.append(f"<p class='meta'>{meta}</p>")
    for heading, body in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>{body}")
    parts.append("</body></html>")
    return "".join(parts)


PLATOON_KEYS = ("spacing_error_rms_m", "spacing_error_max_m", "min_gap_m", "l2_ratio_spacing_error", "pdr",
                "collisions")


def platoon_table(robots: Sequence[Any], followers: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per platoon, named with its law(s) and follower count: the worst follower of each of ``PLATOON_KEYS``, so a
    page can answer "PATH vs look-ahead CACC" platoon by platoon."""
    from orchestrator.metrics.worst import worst_over_followers

    groups: dict[str, dict[str, Mapping[str, Any]]] = {}
    laws: dict[str, set[str]] = {}
    for r in robots:
        if r.name in followers:
            platoon = str(followers[r.name].get("platoon", f"platoon {r.platoon}"))  # where it followed longest
            groups.setdefault(platoon, {})[r.name] = followers[r.name]
            law = None if r.controller is None else r.controller.type
            if law is not None or r.predecessor is not None:  # a joiner takes its new platoon's law
                laws.setdefault(platoon, set()).add(str(law or "external"))
    return {f"{platoon} ({', '.join(sorted(laws.get(platoon) or {'joined'}))}, {len(members)} followers)":
            {k: worst_over_followers(members, k) for k in PLATOON_KEYS} for platoon, members in groups.items()}


def flat(block: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested block as dotted keys (``interest_outcomes.received``): tables show values, never dict literals."""
    out: dict[str, Any] = {}
    for key, value in block.items():
        if isinstance(value, Mapping):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


MAX_CHART_LINES = 16
"""Lines drawn at first in an interactive chart (a button shows the others)."""
MAX_CHART_ROBOTS = 64
"""Robots an interactive chart carries at most (the PNG plots and the tables cover every robot)."""


def interactive_sections(robots: Sequence[Any], series: Mapping[int, Any],
                         follower_series: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Zoomable speed and spacing-error charts (the first ``MAX_CHART_LINES`` robots drawn, up to
    ``MAX_CHART_ROBOTS`` behind a button), as report sections (the chart script rides in the last one, the style
    in the first). Each robot has its colour of the PNG plots (``plots.robot_colors``)."""
    from .interactive import charts_page_parts, series_lines, time_series_chart
    from .plots import robot_colors

    colors = robot_colors([r.name for r in robots])
    carried = [r for r in robots if r.id in series][:MAX_CHART_ROBOTS]
    speeds = series_lines({r.id: r.name for r in carried}, series, "v")
    errors = [(name, np.asarray(fs["t_s"]), np.asarray(fs["spacing_error_m"]))
              for name, fs in list(follower_series.items())[:MAX_CHART_ROBOTS]]
    sections = []
    more = f" ({MAX_CHART_ROBOTS} of {len(robots)} robots)" if len(robots) > MAX_CHART_ROBOTS else ""
    if speeds:
        sections.append((f"Speeds, interactive{more}", time_series_chart(
            speeds, "m/s", [colors[name] for name, _, _ in speeds], "chart-speeds", MAX_CHART_LINES)))
    if errors:
        sections.append((f"Spacing errors, interactive{more}", time_series_chart(
            errors, "m", [colors.get(name, "#555555") for name, _, _ in errors], "chart-spacing", MAX_CHART_LINES)))
    if sections:
        style, script = charts_page_parts()
        sections[0] = (sections[0][0], style + sections[0][1])
        sections[-1] = (sections[-1][0], sections[-1][1] + script)
    return sections


OUTCOME_WORDS = {"completed": "done", "aborted": "aborted", "refused": "refused", "unfinished": "unfinished"}
MANEUVER_COLUMNS = ("type", "robots", "requested_s", "completed_s", "outcome", "reason", "time_to_complete_s",
                    "min_gap_m", "min_ttc_s", "max_decel_mps2", "max_decel_any_mps2", "max_spacing_error_behind_m")
CUT_IN_COLUMNS = ("robot", "intruder", "from_s", "to_s", "min_gap_m", "min_ttc_s", "max_decel_mps2",
                  "max_spacing_error_behind_m")
LINK_COLUMNS = ("follower", "predecessor", "from_s", "to_s", "pdr", "latency_mean_s", "latency_p95_s",
                "interval_mean_s", "sent", "received")


def maneuver_rows(metrics: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """One row per maneuver request of ``metrics.json`` (``#index type``): its robots, request and completion
    times, outcome (done, aborted, refused, unfinished) with the reason, smallest gap and TTC, hardest braking of
    the robots taking part and of any robot, and the largest spacing error it caused behind."""
    rows = {}
    for m in (metrics.get("maneuvers") or {}).get("requests") or []:
        reasons = [m["reason"]] if m.get("reason") else []
        reasons += [f"{a.get('robot')} in {a.get('state')} at {fmt(a.get('t_s'))} s: {a.get('reason')}"
                    for a in m.get("aborts") or [] if a.get("reason") not in reasons]
        rows[f"#{m.get('index')}"] = {
            **{k: m.get(k) for k in MANEUVER_COLUMNS}, "robots": ", ".join(m.get("robots") or []),
            "requested_s": m.get("requested_s", m.get("at_s")), "outcome": OUTCOME_WORDS.get(m.get("status"),
                                                                                            m.get("status")),
            "reason": "; ".join(str(r) for r in reasons) or None}
    return rows


def cut_in_rows(metrics: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """One row per cut-in of ``metrics.json`` (``cut_ins.events``)."""
    events = (metrics.get("cut_ins") or {}).get("events") or []
    return {f"#{k}": {c: e.get(c) for c in CUT_IN_COLUMNS} for k, e in enumerate(events)}


def link_rows(followers: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every link a follower read while it existed (``followers[name].links``; joiners included), in time order
    per follower; a follower of a run without per-link metrics gets its ``following`` intervals only."""
    rows = {}
    for name, f in followers.items():
        stretches = f.get("links") or f.get("following") or []
        for k, link in enumerate(stretches):
            rows[f"{name} ({k + 1})" if len(stretches) > 1 else name] = {
                "follower": name, **{c: link.get(c) for c in LINK_COLUMNS if c != "follower"}}
    return rows


def roles_changed(metrics: Mapping[str, Any]) -> bool:
    """Whether any robot's platoon, position or predecessor changed during the run (``metrics.json`` ``roles``)."""
    seen: dict[str, set[tuple[Any, ...]]] = {}
    for r in (metrics.get("roles") or {}).get("intervals") or []:
        seen.setdefault(r["robot"], set()).add((r["platoon"], r["position"], r["predecessor"]))
    return any(len(v) > 1 for v in seen.values())


def maneuver_section(metrics: Mapping[str, Any], timeline: Path | None = None) -> str:
    """The maneuver section of a page (HTML): the maneuver table, the cut-ins, the roles timeline and who
    followed whom when; empty when the run has none of them (a static platoon, or an old run directory)."""
    parts = []
    rows = maneuver_rows(metrics)
    if rows:
        counts = ", ".join(f"{metrics['maneuvers'].get(k, 0)} {OUTCOME_WORDS[k]}" for k in OUTCOME_WORDS
                           if metrics["maneuvers"].get(k))
        parts.append(f"<h3>Maneuvers ({html.escape(counts)})</h3>"
                     "<p class='meta'>times in s from the start; gap and TTC: smallest between any two vehicles "
                     "in one lane during the maneuver; braking: largest deceleration in m/s² of the robots taking "
                     "part (and of any robot); spacing error behind: the largest it caused in the followers "
                     "behind</p>" + table(rows, MANEUVER_COLUMNS, first="maneuver"))
    cut_ins = cut_in_rows(metrics)
    if cut_ins:
        parts.append("<h3>Cut-ins</h3>" + table(cut_ins, CUT_IN_COLUMNS, first="cut-in"))
    if timeline is not None:
        parts.append("<h3>Roles over time</h3>" + image(timeline, "roles_timeline"))
    links = link_rows(metrics.get("followers") or {})
    if links and (rows or cut_ins or roles_changed(metrics)):
        columns = [c for c in LINK_COLUMNS[1:] if any(r.get(c) is not None for r in links.values())]
        parts.append("<h3>Who followed whom: every link while it existed</h3>" + table(links, columns,
                                                                                      first="follower"))
    return "".join(parts)


def write_run_report(out_dir: Path, run_info: Mapping[str, Any], metrics: Mapping[str, Any], plots: list[Path],
                     robots: Sequence[Any] = (), charts: Sequence[tuple[str, str]] = (),
                     missing_plots: Mapping[str, str] | None = None) -> Path:
    """report.html of one run (``robots``: the run's RobotSpecs, for the per-platoon table; ``charts``:
    interactive sections from ``interactive_sections``, placed before the static plots; ``missing_plots``: the
    PNG files that could not be drawn, with why, listed after the plots)."""
    from orchestrator.metrics import report_columns

    followers = metrics.get("followers", {})
    columns = [c for c in report_columns() if any(f.get(c) is not None for f in followers.values())]
    meta = (
        f"scenario <b>{html.escape(str(run_info.get('scenario')))}</b> · seed {run_info.get('seed')} · "
        f"channel {html.escape(str(run_info.get('channel')))} · "
        f"control {html.escape(', '.join(run_info.get('controllers') or []) or '-')} · "
        f"simulated {fmt(run_info.get('sim_time_s'))} s in "
        f"{fmt(run_info.get('wall_time_s'))} s ({fmt(run_info.get('real_time_factor'))}x real time) · "
        f"coopsim {run_info.get('coopsim_version')} · trace digest <code>{str(run_info.get('digest'))[:16]}</code>"
    )
    sections = [("Followers", table(followers, columns))]
    if robots and len({r.platoon for r in robots}) > 1:
        sections.insert(0, ("Per platoon (worst follower)", table(platoon_table(robots, followers), PLATOON_KEYS,
                                                                   first="platoon")))
    notes = run_info.get("notes") or []
    if notes:
        items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
        sections.insert(0, ("What linear theory predicts", f"<ul class='bad'>{items}</ul>"))
    channel = metrics.get("channel")
    if channel:
        values = flat(channel)
        sections.append(("Channel", table({k: {"value": v} for k, v in values.items()}, ["value"], first="metric")))
    timeline = next((p for p in plots if p.name == "roles_timeline.png"), None)
    maneuvers = maneuver_section(metrics, timeline)
    if maneuvers:
        sections.insert(next((k + 1 for k, (h, _) in enumerate(sections) if h == "Followers"), len(sections)),
                        ("Maneuvers and roles", maneuvers))
    attacked = misbehaviour_section(metrics, table)
    if attacked:
        sections.insert(next((k + 1 for k, (h, _) in enumerate(sections) if h == "Followers"), len(sections)),
                        ("Attacks and misbehaviour detection", attacked))
    sections += list(charts)
    sections += [(p.stem.replace("_", " ").capitalize(), image(p)) for p in plots if p != timeline or not maneuvers]
    if missing_plots:
        items = "".join(f"<li>{html.escape(file)}: {html.escape(why)}</li>" for file, why in missing_plots.items())
        sections.append(("Plots not drawn", f"<ul class='bad'>{items}</ul>"))
    path = out_dir / "report.html"
    write_atomic(path, page(f"coopsim run: {run_info.get('scenario')}", sections, meta, outcome_banner(run_info)))
    return path


def outcome_banner(run_info: Mapping[str, Any]) -> str:
    """The banner of a run whose outcomes must not be missed (a collision, a silent station, an unstable law):
    the run's status and one line per outcome; empty for a clean run."""
    from .outcomes import describe

    lines = describe(run_info.get("outcomes") or {})
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f"status: {html.escape(str(run_info.get('status')))}<ul>{items}</ul>"
