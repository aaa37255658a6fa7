"""Parameter sweeps (``coopsim sweep``): run a scenario over the Cartesian product of parameter values.

Every grid point is validated before anything runs, then each point (and each seed replicate of it) runs in its own
run directory, in parallel processes. The sweep writes ``sweep.json``, ``sweep.csv`` and ``sweep.html`` and answers
"what is the smallest value of a numeric parameter that keeps the platoon string-stable", for each combination of
the other parameters.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import hashlib
import html
import itertools
import json
import math
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import yaml

from .runner import json_safe
from .scenario import Problem, Scenario, ScenarioError, parse_scenario
from .scenario.yamlmarks import load_value

DEFAULT_METRICS = ("spacing_error_max_m", "l2_ratio_spacing_error", "min_gap_m")
STABILITY_METRIC = "l2_ratio_spacing_error"
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

Params = list[tuple[str, list[Any]]]


# -- worst case over followers ----------------------------------------------------------------------------------
def lowest_is_worst(metric: str) -> bool:
    """Whether a smaller value of ``metric`` is the worse one (gaps and delivery ratios); errors, ratios, delays and
    counts are worse when larger."""
    return metric == "pdr" or metric.startswith("min_")


def worst_over_followers(followers: Mapping[str, Mapping[str, Any]], metric: str) -> float | None:
    """The worst follower's value of ``metric`` (None when no follower reports it)."""
    values = [float(f[metric]) for f in followers.values() if f.get(metric) is not None]
    if not values:
        return None
    return min(values) if lowest_is_worst(metric) else max(values)


def is_stable(ratio: float | None, collisions: float | None, tolerance: float = 0.0) -> bool | None:
    """String stability of one run: worst L2 spacing-error ratio <= 1 + tolerance and no collision. None when it
    cannot be judged (no ratio: e.g. a platoon of two, or a predecessor with no spacing error to amplify)."""
    if collisions is not None and collisions > 0:
        return False
    if ratio is None:
        return None
    return ratio <= 1.0 + tolerance


# -- the grid ---------------------------------------------------------------------------------------------------
def split_values(text: str) -> list[str]:
    """Split ``v1,v2,...`` on the commas outside brackets, braces and quotes, so that YAML values such as
    ``[1, 2]`` or ``{at_s: 1}`` stay whole."""
    parts: list[str] = []
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def parse_param(text: str, source: str = "--param") -> tuple[str, list[Any]]:
    """``path=v1,v2,...`` -> (path, values), each value parsed as YAML like ``--set`` does."""
    path, eq, raw = text.partition("=")
    path = path.strip()
    if not eq or not path:
        raise ScenarioError(source, [Problem(text, "--param expects path=v1,v2,..., "
                                                   "e.g. controller.time_gap_s=0.4,0.8,1.2")])
    values = []
    for item in split_values(raw):
        if not item:
            raise ScenarioError(source, [Problem(path, f"--param: empty value in '{raw}'")])
        try:
            values.append(load_value(item))
        except yaml.YAMLError as exc:
            raise ScenarioError(source, [Problem(path, f"--param: value '{item}' is not valid YAML: "
                                                       f"{getattr(exc, 'problem', exc)}")]) from None
    return path, values


def _check_params(params: Params, source: str) -> None:
    problems = []
    seen: set[str] = set()
    for path, values in params:
        if path in seen:
            problems.append(Problem(path, "--param: the same path is swept twice"))
        seen.add(path)
        if not values:
            problems.append(Problem(path, "--param: no values"))
        dumped = [_yaml(v) for v in values]
        repeated = sorted({d for d in dumped if dumped.count(d) > 1})
        if repeated:
            problems.append(Problem(path, f"--param: repeated value(s) {', '.join(repeated)}"))
    if problems:
        raise ScenarioError(source, problems)


def grid(params: Params) -> list[dict[str, Any]]:
    """Every combination of the parameter values, the first parameter varying slowest."""
    paths = [p for p, _ in params]
    return [dict(zip(paths, combo, strict=True)) for combo in itertools.product(*(v for _, v in params))]


def _yaml(value: Any) -> str:
    """A value as one line of YAML that ``--set`` parses back to the same value."""
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 30).strip().removesuffix("...").strip()


_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def point_names(points: Sequence[Mapping[str, Any]]) -> list[str]:
    """Filesystem-safe, unique directory names such as ``time_gap_s=0.4__type=itsg5``. A parameter is named by its
    last path component unless two swept paths share it."""
    if not points:
        return []
    paths = list(points[0])
    leaves = [str(p).split(".")[-1] for p in paths]
    labels = [leaf if leaves.count(leaf) == 1 else path for leaf, path in zip(leaves, paths, strict=True)]
    names: list[str] = []
    for point in points:
        parts = []
        for label, path in zip(labels, paths, strict=True):
            value = point[path]
            text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
            parts.append(f"{_UNSAFE.sub('_', label)}={_UNSAFE.sub('_', text)[:40]}")
        name = "__".join(parts) or "point"
        if len(name) > 120:  # keep paths short; the hash keeps truncated names distinct
            name = name[:110] + "~" + hashlib.sha1(name.encode()).hexdigest()[:8]
        base, k = name, 2
        while name in names:
            name, k = f"{base}~{k}", k + 1
        names.append(name)
    return names


def _point_overrides(point: Mapping[str, Any], base_channel: str) -> list[str]:
    overrides = []
    channel = point.get("channel.type")
    if channel is not None and channel != base_channel:
        # another channel model takes other parameters: start from its defaults, as `coopsim compare` does
        overrides.append(f"channel={_yaml({'type': channel})}")
    overrides += [f"{path}={_yaml(value)}" for path, value in point.items()]
    return overrides


def _validate_points(text: str, source: str, base: list[str], base_channel: str, points: list[dict[str, Any]],
                     names: list[str]) -> list[Scenario]:
    """Every point's scenario, or one ScenarioError listing every problem once with the points it concerns."""
    scenarios: list[Scenario] = []
    found: dict[tuple[str, str, int | None], list[str]] = {}
    for point, name in zip(points, names, strict=True):
        try:
            scenarios.append(parse_scenario(text, source, [*base, *_point_overrides(point, base_channel)]))
        except ScenarioError as exc:
            for p in exc.problems:
                found.setdefault((p.path, p.message, p.line), []).append(name)
    if found:
        swept = tuple(points[0])
        problems = []
        for (path, message, line), where in found.items():
            if path.startswith(swept):
                message = message.replace("(from --set)", "(from --param)")
            shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
            problems.append(Problem(path, f"{message} [sweep point {shown}]", line))
        raise ScenarioError(source, problems)
    return scenarios


# -- running ----------------------------------------------------------------------------------------------------
def _run_one(task: tuple[int, int, Scenario, str, int, str, tuple[str, ...]]) -> dict[str, Any]:
    """One run of one point, in a worker process. Never raises: an exception is recorded as the run's error."""
    index, replicate, scenario, out_dir, seed, source, metrics = task
    record: dict[str, Any] = {"point": index, "replicate": replicate, "seed": seed, "dir": out_dir}
    try:
        from .runner import run_scenario

        result = run_scenario(scenario, Path(out_dir), seed=seed, source=source)
    except Exception as exc:  # a bad point must not stop the sweep
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""
        record.update(status="error", error={"type": type(exc).__name__, "message": str(exc), "where": where})
        return record
    info = result.run_info
    record.update(status=info["status"], wall_time_s=info["wall_time_s"], sim_time_s=info["sim_time_s"],
                  digest=info.get("digest"))
    if not result.ok:
        record["error"] = info.get("error")
        return record
    followers = result.metrics.get("followers", {})
    record["available"] = sorted({k for f in followers.values() for k in f})
    record["worst"] = {m: worst_over_followers(followers, m) for m in metrics}
    record["followers"] = {name: {m: f.get(m) for m in metrics} for name, f in followers.items()}
    collisions = worst_over_followers(followers, "collisions")
    record["stability"] = {STABILITY_METRIC: worst_over_followers(followers, STABILITY_METRIC),
                           "collisions": None if collisions is None else int(collisions)}
    return record


def _execute(tasks: list[tuple[Any, ...]], jobs: int, on_done: Callable[[dict[str, Any]], None]) -> list[dict]:
    workers = max(1, min(len(tasks), jobs or os.cpu_count() or 1))
    records: list[dict[str, Any]] = []
    if workers == 1:
        for task in tasks:
            records.append(_run_one(task))
            on_done(records[-1])
        return records
    pool = ProcessPoolExecutor(max_workers=workers)
    try:
        futures: dict[Future, tuple[Any, ...]] = {pool.submit(_run_one, t): t for t in tasks}
        for fut in as_completed(futures):
            task = futures[fut]
            try:
                record = fut.result()
            except Exception as exc:  # the worker process itself died (e.g. killed): record and go on
                record = {"point": task[0], "replicate": task[1], "seed": task[4], "dir": task[3], "status": "error",
                          "error": {"type": type(exc).__name__, "message": str(exc) or repr(exc)}}
            records.append(record)
            on_done(record)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)  # on Ctrl-C, do not start the queued runs
        raise
    pool.shutdown()
    return records


# -- aggregation ------------------------------------------------------------------------------------------------
def _mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation of the known values (std None below two values)."""
    known = [float(v) for v in values if v is not None]
    if not known:
        return None, None
    mean = sum(known) / len(known)
    if len(known) < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in known) / (len(known) - 1))


def _aggregate(point: dict[str, Any], runs: list[dict[str, Any]], metrics: Sequence[str], replicated: bool,
               tolerance: float) -> None:
    """Fill the point's status, metrics (mean over replicates of the worst follower, per follower) and stability."""
    ok = [r for r in runs if r["status"] == "ok"]
    point["status"] = "ok" if len(ok) == len(runs) else "failed" if not ok else "partial"
    errors = [r["error"] for r in runs if r.get("error")]
    if errors:
        point["error"] = errors[0]
    result: dict[str, Any] = {}
    for m in metrics:
        mean, std = _mean_std([r["worst"][m] for r in ok])
        entry: dict[str, Any] = {"worst": mean}
        if replicated:
            entry["std"] = std
        names = list(dict.fromkeys(n for r in ok for n in r["followers"]))
        entry["followers"] = {n: _mean_std([r["followers"].get(n, {}).get(m) for r in ok])[0] for n in names}
        result[m] = entry
    point["metrics"] = result
    ratios = [r["stability"][STABILITY_METRIC] for r in ok if r["stability"][STABILITY_METRIC] is not None]
    collisions = [r["stability"]["collisions"] for r in ok if r["stability"]["collisions"] is not None]
    ratio = max(ratios) if ratios else None
    crashes = max(collisions) if collisions else None
    verdicts = [is_stable(r["stability"][STABILITY_METRIC], r["stability"]["collisions"], tolerance) for r in ok]
    # worst over replicates: a point is string-stable only if every replicate is
    stable: bool | None
    if False in verdicts:
        stable = False
    elif ok and len(ok) == len(runs) and all(verdicts):
        stable = True
    else:
        stable = None
    point["stability"] = {STABILITY_METRIC: ratio, "collisions": crashes, "stable": stable}


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, value) if _is_number(value) else (1, str(value))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def min_stable(points: Iterable[Mapping[str, Any]], param: str, tolerance: float = 0.0) -> dict[str, Any]:
    """For each combination of the other parameters, the smallest value of ``param`` whose point is string-stable
    (worst ``l2_ratio_spacing_error`` <= 1 + tolerance and no collision).

    ``points`` are sweep points: ``{"params": {path: value}, "status": "ok", "stability":
    {"l2_ratio_spacing_error": float | None, "collisions": int | None}}``. Points that failed or cannot be judged
    count as neither stable nor unstable. ``consistent`` says whether every larger swept value is stable too (a
    False flags a non-monotonic result worth a closer look)."""
    groups: dict[str, dict[str, Any]] = {}
    for point in points:
        others = {k: v for k, v in point["params"].items() if k != param}
        key = json.dumps(others, sort_keys=True, default=str)
        group = groups.setdefault(key, {"others": others, "stable": [], "unstable": [], "undetermined": []})
        value = point["params"][param]
        stab = point.get("stability") or {}
        verdict = None
        if point.get("status") == "ok":
            verdict = is_stable(stab.get(STABILITY_METRIC), stab.get("collisions"), tolerance)
        group["stable" if verdict else "unstable" if verdict is False else "undetermined"].append(value)
    out = []
    for group in groups.values():
        for k in ("stable", "unstable", "undetermined"):
            group[k].sort(key=_sort_key)
        value = group["stable"][0] if group["stable"] else None
        above = [v for v in group["unstable"] + group["undetermined"] if value is not None and _sort_key(v) >
                 _sort_key(value)]
        out.append({"others": group["others"], "value": value, "consistent": value is not None and not above,
                    "stable": group["stable"], "unstable": group["unstable"], "undetermined": group["undetermined"]})
    return {"param": param, "tolerance": tolerance,
            "criterion": f"worst {STABILITY_METRIC} <= {1 + tolerance:g} and no collision", "groups": out}


# -- the sweep --------------------------------------------------------------------------------------------------
def _read_scenario(scenario: str | Path, source: str | None) -> tuple[str, str]:
    if isinstance(scenario, Path) or "\n" not in scenario:
        path = Path(scenario)
        try:
            return path.read_text(encoding="utf-8"), source or str(path)
        except OSError as exc:
            raise ScenarioError(source or str(path), [Problem("", f"cannot read file: {exc.strerror}")]) from None
    return scenario, source or "<scenario>"


def sweep(
    scenario: str | Path,
    params: Params,
    out: str | Path,
    *,
    metrics: Sequence[str] = DEFAULT_METRICS,
    seeds: int | None = None,
    seed: int | None = None,
    overrides: Sequence[str] = (),
    jobs: int = 0,
    tolerance: float = 0.0,
    stable_param: str | None = None,
    source: str | None = None,
    console: Any = None,
) -> dict[str, Any]:
    """Run ``scenario`` (a file path, or YAML text when the string has a newline) at every point of the grid of
    ``params`` ([(path, [values])]) and write sweep.json, sweep.csv and sweep.html into ``out``.

    Every point uses the scenario's seed (``seed`` replaces it), so points differ only by their parameters; with
    ``seeds=N`` each point runs seeds seed .. seed+N-1 and the metrics are the mean (and sample std) over them.
    ``overrides`` are ``--set`` strings applied before the parameters. Every point is validated first: a bad path
    or value raises ScenarioError before any run. A point whose run fails is recorded with its error and the
    sweep goes on. Returns what sweep.json holds."""
    text, source = _read_scenario(scenario, source)
    params = [(str(p), list(v)) for p, v in params]
    if not params:
        raise ScenarioError(source, [Problem("", "a sweep needs at least one --param path=v1,v2,...")])
    _check_params(params, source)
    metrics = tuple(dict.fromkeys(metrics))
    if seeds is not None and seeds < 1:
        raise ScenarioError(source, [Problem("", f"--seeds must be at least 1, got {seeds}")])
    base = [*(([f"seed={int(seed)}"]) if seed is not None else []), *overrides]
    base_scenario = parse_scenario(text, source, base)
    points = grid(params)
    names = point_names(points)
    scenarios = _validate_points(text, source, base, base_scenario.channel.type, points, names)
    if stable_param is None:
        stable_param = next((p for p, values in params if all(_is_number(v) for v in values)), None)
    elif stable_param not in dict(params):
        raise ScenarioError(source, [Problem(stable_param, "--stable-param must be one of the swept paths: "
                                                           f"{', '.join(p for p, _ in params)}")])
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    replicated = seeds is not None
    tasks = []
    for i, (sc, name) in enumerate(zip(scenarios, names, strict=True)):
        first = sc.seed  # a swept `seed` parameter wins over the scenario's
        run_seeds = [first + k for k in range(seeds)] if replicated else [first]
        for k, s in enumerate(run_seeds):
            run_dir = out / name / f"seed={s}" if replicated else out / name
            tasks.append((i, k, sc, str(run_dir), s, source, metrics))
    done = [0]

    def report(record: dict[str, Any]) -> None:
        done[0] += 1
        if console is not None:
            _say(console, record, names[record["point"]], done[0], len(tasks))

    records = _execute(tasks, jobs, report)
    available = {k for r in records for k in r.pop("available", ())}
    by_point: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(points))}
    for record in sorted(records, key=lambda r: (r["point"], r["replicate"])):
        by_point[record["point"]].append(record)
    result_points = []
    for i, (point, name) in enumerate(zip(points, names, strict=True)):
        runs = by_point[i]
        for r in runs:  # run directories relative to the sweep directory, so the result can be moved
            r["dir"] = Path(r["dir"]).relative_to(out).as_posix()
            r.pop("point", None)
        entry: dict[str, Any] = {"name": name, "params": point, "dir": name, "seeds": [r["seed"] for r in runs]}
        _aggregate(entry, runs, metrics, replicated, tolerance)
        entry["runs"] = runs
        result_points.append(entry)
    result: dict[str, Any] = {
        "scenario": base_scenario.name,
        "source": source,
        "seed": base_scenario.seed,
        "seeds": seeds or 1,
        "overrides": list(overrides),
        "grid": {p: v for p, v in params},
        "metrics": list(metrics),
        "aggregation": ("worst follower per run (max, min for gaps and pdr)"
                        + (f"; mean and sample std over {seeds} seeds" if replicated else "")),
        "ok": all(p["status"] == "ok" for p in result_points),
        # metrics no run reported (a misspelt name), with the closest name the runs did report
        "missing_metrics": {m: next(iter(difflib.get_close_matches(m, sorted(available), n=1)), None)
                            for m in metrics if available and m not in available},
        "points": result_points,
        "min_stable": min_stable(result_points, stable_param, tolerance) if stable_param else None,
    }
    (out / "sweep.json").write_text(json.dumps(json_safe(result), indent=2, default=str), encoding="utf-8")
    _write_csv(out / "sweep.csv", result)
    _write_html(out, result)
    return result


def _say(console: Any, record: dict[str, Any], name: str, done: int, total: int) -> None:
    if record["status"] == "ok":
        status = f"ok ({record['sim_time_s']:.1f} s simulated in {record['wall_time_s']:.2f} s)"
    else:
        status = f"FAILED: {(record.get('error') or {}).get('message')}"
    console.print(f"  [{done}/{total}] {name} seed {record['seed']}: {status}", highlight=False, markup=False)


# -- outputs ----------------------------------------------------------------------------------------------------
def _cell(value: Any) -> Any:
    if value is None:
        return ""
    return value if isinstance(value, int | float | str) else json.dumps(value, default=str)


def _write_csv(path: Path, result: dict[str, Any]) -> None:
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


def _num(value: Any, std: Any = None) -> str:
    if value is None:
        return "-"
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return f"{text} ± {std:.2g}" if isinstance(std, float) else text


def _status_text(point: Mapping[str, Any]) -> str:
    if point["status"] == "ok":
        return "ok"
    return f"{point['status']}: {(point.get('error') or {}).get('message')}"


def _label(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _write_html(out: Path, result: dict[str, Any]) -> None:
    from .report import image, page, table

    paths = list(result["grid"])
    rows = {}
    for p in result["points"]:
        row: dict[str, Any] = {k: _label(p["params"][k]) for k in paths}
        for m in result["metrics"]:
            row[m] = _num(p["metrics"][m]["worst"], p["metrics"][m].get("std"))
        row["stable"] = p["stability"]["stable"]
        row["status"] = _status_text(p)
        rows[p["name"]] = row
    columns = [*paths, *result["metrics"], "stable", "status"]
    agg = "mean ± std over seeds of the worst follower" if result["seeds"] > 1 else "worst follower"
    sections = [(f"Grid points ({agg})", table(rows, columns, first="point"))]
    ms = result["min_stable"]
    if ms:
        stable_rows = {}
        for g in ms["groups"]:
            key = ", ".join(f"{k}={_label(v)}" for k, v in g["others"].items()) or "all"
            stable_rows[key] = {"smallest stable": "none" if g["value"] is None else _label(g["value"]),
                                "larger values all stable": g["consistent"],
                                "unstable": ", ".join(map(_label, g["unstable"])) or "-",
                                "undetermined": ", ".join(map(_label, g["undetermined"])) or "-"}
        sections.append((f"Smallest string-stable {ms['param']} ({ms['criterion']})",
                         table(stable_rows, ["smallest stable", "larger values all stable", "unstable",
                                             "undetermined"], first="other parameters")))
    plots_dir = out / "plots"
    plots_dir.mkdir(exist_ok=True)
    for m in result["metrics"]:
        path = _plot_metric(plots_dir, result, m)
        if path is not None:
            sections.append((f"{m} against {paths[0]}", image(path)))
    last = result["seed"] + result["seeds"] - 1
    seeds = f"seeds {result['seed']} .. {last}" if result["seeds"] > 1 else f"seed {result['seed']}"
    meta = (f"scenario <b>{html.escape(str(result['scenario']))}</b> · {seeds} · "
            f"{len(result['points'])} points · parameters {html.escape(', '.join(paths))}")
    (out / "sweep.html").write_text(page("coopsim: parameter sweep", sections, meta), encoding="utf-8")


def _plot_metric(plots_dir: Path, result: dict[str, Any], metric: str) -> Path | None:
    """The metric against the first parameter, one line per combination of the other parameters."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = list(result["grid"])
    xs = result["grid"][paths[0]]
    numeric = all(_is_number(v) for v in xs)
    position = {_yaml(v): (float(v) if numeric else float(i)) for i, v in enumerate(xs)}
    lines: dict[str, list[tuple[float, float, float]]] = {}
    for p in result["points"]:
        value = p["metrics"][metric]["worst"]
        if value is None:
            continue
        label = ", ".join(f"{k.split('.')[-1]}={_label(p['params'][k])}" for k in paths[1:])
        std = p["metrics"][metric].get("std") or 0.0
        lines.setdefault(label, []).append((position[_yaml(p["params"][paths[0]])], value, std))
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for label, pts in lines.items():
        pts.sort()
        x, y, e = zip(*pts, strict=True)
        if result["seeds"] > 1:
            ax.errorbar(x, y, yerr=e, marker="o", capsize=3, label=label or None)
        else:
            ax.plot(x, y, marker="o", label=label or None)
    if metric == STABILITY_METRIC and result["min_stable"]:
        ax.axhline(1 + result["min_stable"]["tolerance"], color="k", lw=0.8, ls="--", label="string-stability limit")
    if not numeric:
        ax.set_xticks([position[_yaml(v)] for v in xs], [_label(v) for v in xs])
    ax.set_xlabel(paths[0])
    ax.set_ylabel(f"{metric} (worst follower)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = plots_dir / f"{_UNSAFE.sub('_', metric)}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- command line -----------------------------------------------------------------------------------------------
def add_sweep_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``sweep`` subcommand to the ``coopsim`` subparsers."""
    p = subparsers.add_parser("sweep", help="run a scenario over a grid of parameter values, in parallel")
    p.add_argument("scenario", type=Path, help="scenario YAML file")
    p.add_argument("--param", dest="params", action="append", default=[], metavar="PATH=V1,V2,...",
                   help="a swept field and its values, each parsed as YAML like --set (repeatable; the grid is "
                        "the Cartesian product)")
    p.add_argument("--metrics", default=",".join(DEFAULT_METRICS),
                   help="comma-separated follower metrics to report (default: %(default)s)")
    p.add_argument("--seeds", type=int, help="run seeds seed..seed+N-1 per point and report mean and std")
    p.add_argument("--seed", type=int, help="override the scenario seed")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE",
                   help="override a field for every point (repeatable)")
    p.add_argument("--jobs", type=int, default=0, help="parallel processes (default: one per core)")
    p.add_argument("--out", type=Path, help="output directory (default: runs/<scenario name>-sweep)")
    p.add_argument("--tolerance", type=float, default=0.0,
                   help="string stability: worst l2_ratio_spacing_error <= 1 + tolerance (default: %(default)s)")
    p.add_argument("--stable-param", metavar="PATH",
                   help="the numeric parameter to find the smallest string-stable value of (default: the first "
                        "swept parameter whose values are all numbers)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def run_sweep_command(args: argparse.Namespace, console: Any) -> int:
    """Run ``coopsim sweep`` from parsed arguments; returns the exit code (0 all points ok, 1 some point failed,
    2 bad input, reported before any run)."""
    from rich.console import Console

    source = str(args.scenario)
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    err = Console(stderr=True)
    try:
        if not metrics:
            raise ScenarioError(source, [Problem("", "--metrics: no metric named")])
        params = [parse_param(item) for item in args.params]
        base = parse_scenario(*_read_scenario(args.scenario, source), args.overrides)
        out = args.out or Path("runs") / f"{base.name}-sweep"
        result = sweep(args.scenario, params, out, metrics=metrics, seeds=args.seeds, seed=args.seed,
                       overrides=args.overrides, jobs=args.jobs, tolerance=args.tolerance,
                       stable_param=args.stable_param, source=source, console=None if args.quiet else err)
    except ScenarioError as exc:
        print(f"error: invalid scenario\n{exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print_sweep_summary(result, console)
    console.print(f"report: {out / 'sweep.html'}  (table: {out / 'sweep.csv'}, data: {out / 'sweep.json'})",
                  highlight=False, markup=False)
    return EXIT_OK if result["ok"] else EXIT_FAILED


def print_sweep_summary(result: dict[str, Any], console: Any) -> None:
    """The grid as a table (mean ± std with replicates) and the smallest string-stable values."""
    from rich.table import Table

    replicated = result["seeds"] > 1
    title = (f"{result['scenario']} · {len(result['points'])} points · "
             + (f"seeds {result['seed']}..{result['seed'] + result['seeds'] - 1} (mean ± std)" if replicated
                else f"seed {result['seed']}") + " · worst follower")
    tbl = Table(title=title)
    for path in result["grid"]:
        tbl.add_column(path, overflow="fold")
    for m in result["metrics"]:
        tbl.add_column(m, justify="right", overflow="fold")
    tbl.add_column("stable", justify="center")
    tbl.add_column("status")
    for p in result["points"]:
        stable = {True: "yes", False: "no", None: "-"}[p["stability"]["stable"]]
        status = _status_text(p)
        tbl.add_row(*(_label(p["params"][k]) for k in result["grid"]),
                    *(_num(p["metrics"][m]["worst"], p["metrics"][m].get("std")) for m in result["metrics"]),
                    stable, status)
    console.print(tbl)
    for m, close in result.get("missing_metrics", {}).items():
        hint = f" (did you mean '{close}'?)" if close else ""
        console.print(f"warning: no run reported the metric '{m}'{hint}", highlight=False, markup=False)
    ms = result["min_stable"]
    if not ms:
        console.print("smallest string-stable value: no swept parameter is numeric", highlight=False)
        return
    console.print(f"smallest string-stable {ms['param']} ({ms['criterion']}):", highlight=False, markup=False)
    for g in ms["groups"]:
        where = ", ".join(f"{k}={_label(v)}" for k, v in g["others"].items()) or "all points"
        if g["value"] is None:
            answer = "none of the swept values"
        else:
            answer = _label(g["value"])
            if not g["consistent"]:
                worse = [v for v in g["unstable"] + g["undetermined"] if _sort_key(v) > _sort_key(g["value"])]
                answer += f" (but not stable or not judged at {', '.join(map(_label, worse))})"
        console.print(f"  {where}: {answer}", highlight=False, markup=False)


__all__ = ["DEFAULT_METRICS", "add_sweep_parser", "grid", "is_stable", "min_stable", "parse_param", "point_names",
           "print_sweep_summary", "run_sweep_command", "split_values", "sweep", "worst_over_followers"]
