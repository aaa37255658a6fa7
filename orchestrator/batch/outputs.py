"""What a sweep writes: ``sweep.json`` (everything), ``sweep.csv`` (one row per point) and ``sweep.html`` (the
table, the smallest string-stable values and one plot per metric)."""

from __future__ import annotations

import csv
import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..runner import json_safe
from .aggregate import is_number
from .grid import UNSAFE, yaml_value


def write_sweep(out: Path, result: dict[str, Any]) -> None:
    """Write sweep.json, sweep.csv and sweep.html (with its plots) into ``out``."""
    (out / "sweep.json").write_text(json.dumps(json_safe(result), indent=2, default=str), encoding="utf-8")
    write_csv(out / "sweep.csv", result)
    write_html(out, result)


def label(value: Any) -> str:
    """A parameter value as shown in tables and legends."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def number(value: Any, std: Any = None) -> str:
    """A metric for a table: 4 significant digits, '± std' with replicates, '-' when missing."""
    if value is None:
        return "-"
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return f"{text} ± {std:.2g}" if isinstance(std, float) else text


def status_text(point: Mapping[str, Any]) -> str:
    """``ok``, or the point's status with its first error message."""
    if point["status"] == "ok":
        return "ok"
    return f"{point['status']}: {(point.get('error') or {}).get('message')}"


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    return value if isinstance(value, int | float | str) else json.dumps(value, default=str)


def write_csv(path: Path, result: dict[str, Any]) -> None:
    """One row per point: the parameters, each metric (and its std with replicates), stability, status."""
    replicated = result["seeds"] > 1
    header = list(result["grid"])
    for m in result["metrics"]:
        header += [m, f"{m}_std"] if replicated else [m]
    header += ["stable", "status", "seeds", "dir"]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for p in result["points"]:
            row = [_cell(p["params"][k]) for k in result["grid"]]
            for m in result["metrics"]:
                row.append(_cell(p["metrics"][m]["worst"]))
                if replicated:
                    row.append(_cell(p["metrics"][m].get("std")))
            row += [_cell(p["stability"]["stable"]), p["status"], " ".join(map(str, p["seeds"])), p["dir"]]
            writer.writerow(row)


def batching_text(batching: Mapping[str, Any] | None) -> str:
    """One line on how the runs ran: how many shared worlds, how many ran alone and why."""
    if not batching:
        return ""
    parts = []
    if batching["batched_runs"]:
        parts.append(f"{batching['batched_runs']} runs as copies in {batching['worlds']} shared world(s) (no plots or "
                     "report per run: 'coopsim metrics RUN_DIR' draws them)")
    if batching["alone_runs"]:
        why = "; ".join(f"{reason}: {n}" for reason, n in batching["alone_because"].items())
        parts.append(f"{batching['alone_runs']} runs in processes of their own ({why})")
    return " · ".join(parts)


def write_html(out: Path, result: dict[str, Any]) -> None:
    """sweep.html: the grid table, the smallest string-stable values, and each metric against the first
    parameter."""
    from ..reporting.report import image, page, table

    paths = list(result["grid"])
    rows = {}
    for p in result["points"]:
        row: dict[str, Any] = {k: label(p["params"][k]) for k in paths}
        for m in result["metrics"]:
            row[m] = number(p["metrics"][m]["worst"], p["metrics"][m].get("std"))
        row["stable"] = p["stability"]["stable"]
        row["status"] = status_text(p)
        rows[p["name"]] = row
    columns = [*paths, *result["metrics"], "stable", "status"]
    agg = "mean ± std over seeds of the worst follower" if result["seeds"] > 1 else "worst follower"
    sections = [(f"Grid points ({agg})", table(rows, columns, first="point"))]
    ms = result["min_stable"]
    if ms:
        stable_rows = {}
        for g in ms["groups"]:
            key = ", ".join(f"{k}={label(v)}" for k, v in g["others"].items()) or "all"
            stable_rows[key] = {"smallest stable": "none" if g["value"] is None else label(g["value"]),
                                "larger values all stable": g["consistent"],
                                "unstable": ", ".join(map(label, g["unstable"])) or "-",
                                "undetermined": ", ".join(map(label, g["undetermined"])) or "-",
                                "note": g.get("edge") or "-"}
        explained = ""
        if result.get("criterion"):
            explained = (f"<p>Criterion: {html.escape(ms['criterion'])}.</p>"
                         f"<p>{html.escape(result['criterion']['excitation'])}</p>")
        sections.append((f"Smallest string-stable {ms['param']} ({ms.get('criterion_name', 'spacing_error:l2')})",
                         explained + table(stable_rows, ["smallest stable", "larger values all stable", "unstable",
                                                         "undetermined", "note"], first="other parameters")))
    plots_dir = out / "plots"
    plots_dir.mkdir(exist_ok=True)
    for m in result["metrics"]:
        path = plot_metric(plots_dir, result, m)
        if path is not None:
            sections.append((f"{m} against {paths[0]}", image(path)))
    last = result["seed"] + result["seeds"] - 1
    seeds = f"seeds {result['seed']} .. {last}" if result["seeds"] > 1 else f"seed {result['seed']}"
    meta = (f"scenario <b>{html.escape(str(result['scenario']))}</b> · {seeds} · "
            f"{len(result['points'])} points · parameters {html.escape(', '.join(paths))}"
            f"<br>{html.escape(batching_text(result.get('batching')))}")
    (out / "sweep.html").write_text(page("coopsim: parameter sweep", sections, meta), encoding="utf-8")


def plot_metric(plots_dir: Path, result: dict[str, Any], metric: str) -> Path | None:
    """The metric against the first parameter, one line per combination of the other parameters."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = list(result["grid"])
    xs = result["grid"][paths[0]]
    numeric = all(is_number(v) for v in xs)
    position = {yaml_value(v): (float(v) if numeric else float(i)) for i, v in enumerate(xs)}
    lines: dict[str, list[tuple[float, float, float]]] = {}
    for p in result["points"]:
        value = p["metrics"][metric]["worst"]
        if value is None:
            continue
        name = ", ".join(f"{k.split('.')[-1]}={label(p['params'][k])}" for k in paths[1:])
        std = p["metrics"][metric].get("std") or 0.0
        lines.setdefault(name, []).append((position[yaml_value(p["params"][paths[0]])], value, std))
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for name, pts in lines.items():
        pts.sort()
        x, y, e = zip(*pts, strict=True)
        if result["seeds"] > 1:
            ax.errorbar(x, y, yerr=e, marker="o", capsize=3, label=name or None)
        else:
            ax.plot(x, y, marker="o", label=name or None)
    if result["min_stable"] and metric == result["min_stable"].get("metric", "l2_ratio_spacing_error"):
        ax.axhline(1 + result["min_stable"]["tolerance"], color="k", lw=0.8, ls="--", label="string-stability limit")
    if not numeric:
        ax.set_xticks([position[yaml_value(v)] for v in xs], [label(v) for v in xs])
    ax.set_xlabel(paths[0])
    ax.set_ylabel(f"{metric} (worst follower)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = plots_dir / f"{UNSAFE.sub('_', metric)}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["batching_text", "label", "number", "plot_metric", "status_text", "write_csv", "write_html", "write_sweep"]
