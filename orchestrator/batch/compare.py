"""Comparisons (``coopsim compare``): a sweep over one categorical axis, run on the same seed.

The axis is the channel model (``--channels ideal,itsg5``: everything else identical) or the fidelity
(``--fidelity theory,full``: unicycles with ground truth over an ideal channel, against dynamic vehicles with
odometry-based estimates over ITS-G5). Each variant is a set of ``--set`` overrides on the scenario, built by
``parse_scenario`` like any ``coopsim run`` (so the channel's defaults, the geodetic origin among them, come from
the one defaults path), and run by the batch runner in its own directory. The comparison writes
``comparison.json`` and ``comparison.html``; its summary is the worst follower per metric (``aggregate``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..recording.safe_files import OutputPathError, check_dir, check_outputs, write_atomic
from ..runner import json_safe
from ..scenario import Problem, Scenario, ScenarioError, parse_scenario
from .aggregate import RULE, worst_over_followers
from .compare_report import write_comparison_html
from .grid import Point, build_scenarios, point_overrides, scenario_text
from .runner import Record, Task, execute, run_outputs

SUMMARY_KEYS = (
    "spacing_error_rms_m",
    "spacing_error_max_m",
    "lateral_deviation_max_m",
    "min_gap_m",
    "l2_ratio_spacing_error",
    "collisions",
    "pdr",
    "latency_mean_s",
    "latency_p95_s",
    "interval_mean_s",
    "aoi_mean_s",
)
CHANNEL_KEYS = ("cbr_mean", "cbr_max")

FIDELITIES: dict[str, dict[str, str]] = {
    # the controllers' design model: unicycles, exact state, ideal channel (the leader's inputs arrive unchanged)
    "theory": {"model": "unicycle", "physics.estimate": "ground_truth", "channel.type": "ideal",
               "controller.predict": "none"},
    # the physical robot: dynamic single track with tyres, odometry-based estimate, ITS-G5 CAMs
    "full": {"model": "dynamic", "physics.estimate": "odometry", "channel.type": "itsg5"},
}
# the demo's story: what the standard's generation rules cost, and how much of it prediction wins back
STORY: dict[str, dict[str, str]] = {
    "ideal": {"channel.type": "ideal", "controller.predict": "none"},
    "itsg5": {"channel.type": "itsg5", "controller.predict": "none"},
    "itsg5_predicted": {"channel.type": "itsg5", "controller.predict": "ctrv"},
}
OPTIONS = {"channel": "--channels", "fidelity": "--fidelity", "story": "coopsim demo"}


def variant_overrides(base: Scenario, kind: str, name: str) -> list[str]:
    """The ``--set`` overrides that turn ``base`` into variant ``name`` of axis ``kind`` (``channel`` or
    ``fidelity``). A channel variant is the sweep point ``channel.type=name``; a fidelity sets the channel the
    same way, the estimate and prediction, and the vehicle model of every robot."""
    if kind == "channel":
        return point_overrides({"channel.type": name}, base.channel.type, base.channel_variants)
    if kind == "story":
        if name not in STORY:
            raise ValueError(f"unknown variant '{name}'; allowed: {', '.join(STORY)}")
        settings = STORY[name]
        return [*point_overrides({"channel.type": settings["channel.type"]}, base.channel.type,
                                 base.channel_variants),
                f"controller.predict={settings['controller.predict']}"]
    try:
        settings = FIDELITIES[name]
    except KeyError:
        raise ValueError(f"unknown fidelity '{name}'; allowed: {', '.join(FIDELITIES)}") from None
    overrides = point_overrides({"channel.type": settings["channel.type"]}, base.channel.type, base.channel_variants)
    overrides += [f"{k}={v}" for k, v in settings.items() if k not in ("model", "channel.type")]
    model = settings["model"]
    if isinstance(base.vehicles, list):
        overrides += [f"vehicles[{i}].vehicle.model={model}" for i in range(len(base.vehicles))]
    else:
        overrides.append(f"vehicles.template.model={model}")
        overrides += [f"vehicles.overrides.{robot}.vehicle.model={model}"
                      for robot, entry in base.vehicles.overrides.items() if entry.vehicle is not None]
    return overrides


def with_variant(scenario: Scenario, kind: str, name: str, source: str = "<scenario>") -> Scenario:
    """The scenario as variant ``name`` of axis ``kind``, built as ``compare`` builds it."""
    text, source = scenario_text(scenario, source)
    return parse_scenario(text, source, variant_overrides(scenario, kind, name))


def with_channel(scenario: Scenario, channel: str) -> Scenario:
    """The scenario with another channel model, at that model's defaults (the scenario's own channel block is
    kept when it names that model)."""
    return with_variant(scenario, "channel", channel)


def with_fidelity(scenario: Scenario, fidelity: str) -> Scenario:
    """The scenario at a fidelity of ``FIDELITIES`` (the vehicle model is set for every robot)."""
    return with_variant(scenario, "fidelity", fidelity)


def compare(
    scenario: Scenario | str | Path,
    kind: str,
    names: list[str],
    out: Path,
    seed: int | None = None,
    jobs: int = 0,
    source: str | None = None,
    console: Any = None,
    overrides: list[str] | tuple[str, ...] = (),
    scheduler: str | None = None,
    shared_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Run ``scenario`` (a validated Scenario, a file path, or YAML text) once per channel model
    (``kind="channel"``) or per fidelity (``kind="fidelity"``, see ``FIDELITIES``), on the same seed (``seed``
    replaces the scenario's), in parallel processes, and write comparison.json/.html into ``out``. ``overrides``
    are ``--set`` strings applied before each variant's. A variant whose run fails is reported with its error and
    the others still run. ``scheduler``, ``shared_dir``: run on a Dask cluster as ``sweep`` does. Returns what
    comparison.json holds."""
    from comms_models import COMMS_MODELS

    text, source = scenario_text(scenario, source)
    if kind not in OPTIONS:
        raise ValueError(f"unknown comparison '{kind}'; allowed: {', '.join(OPTIONS)}")
    allowed = COMMS_MODELS.names() if kind == "channel" else list(STORY) if kind == "story" else list(FIDELITIES)
    names = list(dict.fromkeys(names))
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise ScenarioError(source, [Problem(OPTIONS[kind], f"unknown {kind} "
                                             f"{', '.join(map(repr, unknown)) or '(none given)'}; "
                                             f"allowed: {', '.join(allowed)}")])
    base_overrides = [*([f"seed={int(seed)}"] if seed is not None else []), *overrides]
    base = parse_scenario(text, source, base_overrides)
    points = [Point(name, {kind: name}, variant_overrides(base, kind, name)) for name in names]
    scenarios = build_scenarios(text, source, base_overrides, points, label="variant")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    try:  # an output directory used before: nothing is written through a link found there
        check_outputs(out, ("comparison.json", "comparison.html", "comparison.partial.json"), ("plots",))
        for name in names:
            check_dir(out / name)
    except OutputPathError as exc:
        raise ScenarioError(source, [Problem("--out", str(exc))]) from None
    tasks = [Task(i, 0, sc, out / p.name, sc.seed, source) for i, (p, sc) in enumerate(zip(points, scenarios,
                                                                                          strict=True))]
    notify = None if console is None else (lambda m: console.print(m, highlight=False, markup=False))
    records = {r["point"]: r for r in execute(tasks, jobs, lambda r: _say(console, names[r["point"]], r),
                                              scheduler=scheduler, shared_dir=shared_dir,
                                              partial=out / "comparison.partial.json",
                                              notify=notify)}
    (out / "comparison.partial.json").unlink(missing_ok=True)
    runs = {}
    for i, name in enumerate(names):
        run, metrics = run_outputs(records[i])
        runs[name] = {"run": run, "metrics": metrics}
    summary = summarise(runs)
    comparison = {
        "scenario": base.name,
        "seed": base.seed,
        "kind": kind,
        "variants": names,
        "ok": all(r["status"] == "ok" for r in records.values()),
        "aggregation": RULE,
        "summary": summary,
        "differences": differences(summary, names),
        "runs": runs,
    }
    write_atomic(out / "comparison.json", json.dumps(json_safe(comparison), indent=2))
    write_comparison_html(out, comparison, SUMMARY_KEYS)
    return comparison


def _say(console: Any, name: str, record: Record) -> None:
    if console is None:
        return
    status = "ok" if record["status"] == "ok" else f"FAILED: {(record.get('error') or {}).get('message')}"
    done = (f" ({record['sim_time_s']:.1f} s simulated in {record['wall_time_s']:.2f} s)"
            if "sim_time_s" in record else "")
    console.print(f"  {name:>8}: {status}{done}", highlight=False)


def summarise(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per summary metric, each variant's worst follower; the channel's busy ratio when some variant has one."""
    out: dict[str, dict[str, Any]] = {}
    for key in SUMMARY_KEYS:
        out[key] = {c: worst_over_followers(r["metrics"].get("followers", {}), key) for c, r in runs.items()}
    for key in CHANNEL_KEYS:
        values = {c: r["metrics"].get("channel", {}).get(key) for c, r in runs.items()}
        if any(v is not None for v in values.values()):
            out[key] = values
    return out


def differences(summary: dict[str, dict[str, Any]], variants: list[str]) -> dict[str, dict[str, Any]]:
    """Each variant minus the first one, per summary metric (None when either is missing)."""
    base = variants[0]
    diffs: dict[str, dict[str, Any]] = {}
    for key, values in summary.items():
        diffs[key] = {
            c: (values[c] - values[base]) if values.get(c) is not None and values.get(base) is not None else None
            for c in variants[1:]
        }
    return diffs


__all__ = ["FIDELITIES", "STORY", "SUMMARY_KEYS", "compare", "differences", "summarise", "variant_overrides",
           "with_channel", "with_fidelity", "with_variant"]
