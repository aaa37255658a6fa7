"""Self-contained HTML reports (plots embedded as base64 PNG, no external files or scripts)."""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
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
    from .metrics.worst import worst_over_followers

    groups: dict[int, dict[str, Mapping[str, Any]]] = {}
    laws: dict[int, set[str]] = {}
    for r in robots:
        if r.name in followers:
            groups.setdefault(r.platoon, {})[r.name] = followers[r.name]
            laws.setdefault(r.platoon, set()).add(str((r.config.get("controller") or {}).get("type", "external")))
    return {f"platoon {platoon} ({', '.join(sorted(laws[platoon]))}, {len(members)} followers)":
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
                         follower_series: Mapping[str, Mapping[str, Any]],
                         colors: Callable[[int], list[str] | None] | None = None) -> list[tuple[str, str]]:
    """Zoomable speed and spacing-error charts (the first ``MAX_CHART_LINES`` robots drawn, up to
    ``MAX_CHART_ROBOTS`` behind a button), as report sections (the chart script rides in the last one, the style
    in the first). ``colors``: the palette of n lines when already known (a plot worker computed it), else None
    and it is computed here with matplotlib."""
    from .interactive import charts_page_parts, hex_colors, series_lines, time_series_chart

    def palette(n: int) -> list[str]:
        known = colors(n) if colors is not None else None
        return known if known is not None else hex_colors(n)

    carried = [r for r in robots if r.id in series][:MAX_CHART_ROBOTS]
    speeds = series_lines({r.id: r.name for r in carried}, series, "v")
    errors = [(name, np.asarray(fs["t_s"]), np.asarray(fs["spacing_error_m"]))
              for name, fs in list(follower_series.items())[:MAX_CHART_ROBOTS]]
    sections = []
    more = f" ({MAX_CHART_ROBOTS} of {len(robots)} robots)" if len(robots) > MAX_CHART_ROBOTS else ""
    if speeds:
        sections.append((f"Speeds, interactive{more}", time_series_chart(
            speeds, "m/s", palette(len(speeds)), "chart-speeds", MAX_CHART_LINES)))
    if errors:
        sections.append((f"Spacing errors, interactive{more}", time_series_chart(
            errors, "m", palette(len(errors)), "chart-spacing", MAX_CHART_LINES)))
    if sections:
        style, script = charts_page_parts()
        sections[0] = (sections[0][0], style + sections[0][1])
        sections[-1] = (sections[-1][0], sections[-1][1] + script)
    return sections


def write_run_report(out_dir: Path, run_info: Mapping[str, Any], metrics: Mapping[str, Any], plots: list[Path],
                     robots: Sequence[Any] = (), charts: Sequence[tuple[str, str]] = (),
                     missing_plots: Mapping[str, str] | None = None) -> Path:
    """report.html of one run (``robots``: the run's RobotSpecs, for the per-platoon table; ``charts``:
    interactive sections from ``interactive_sections``, placed before the static plots; ``missing_plots``: the
    PNG files that could not be drawn, with why, listed after the plots)."""
    from .metrics import report_columns

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
    sections += list(charts)
    sections += [(p.stem.replace("_", " ").capitalize(), image(p)) for p in plots]
    if missing_plots:
        items = "".join(f"<li>{html.escape(file)}: {html.escape(why)}</li>" for file, why in missing_plots.items())
        sections.append(("Plots not drawn", f"<ul class='bad'>{items}</ul>"))
    path = out_dir / "report.html"
    path.write_text(page(f"coopsim run: {run_info.get('scenario')}", sections, meta, outcome_banner(run_info)),
                    encoding="utf-8")
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
