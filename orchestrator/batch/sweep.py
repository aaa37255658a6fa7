"""Parameter sweeps (``coopsim sweep``): a scenario over the Cartesian product of parameter values.

Every grid point is validated before anything runs, then each point (and each seed replicate of it) runs in its own
run directory, in parallel processes. The sweep answers "what is the smallest value of a numeric parameter that
keeps the platoon string-stable", for each combination of the other parameters.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..scenario import Problem, Scenario, ScenarioError, parse_scenario
from .aggregate import RULE, aggregate_point, is_number, min_stable, summarise_run
from .args import DEFAULT_METRICS
from .batched import BatchTask, batching_summary, plan_batches
from .criteria import DEFAULT, Criterion, excitation_note
from .grid import Params, Point, build_scenarios, check_params, grid_points, scenario_text
from .outputs import write_sweep
from .runner import Record, Task, by_point, execute, run_outputs


def sweep(
    scenario: str | Path | Scenario,
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
    criterion: Criterion = DEFAULT,
    source: str | None = None,
    console: Any = None,
    scheduler: str | None = None,
    shared_dir: str | Path | None = None,
    batch: bool = True,
) -> dict[str, Any]:
    """Run ``scenario`` (a file path, YAML text when the string has a newline, or a validated Scenario) at every
    point of the grid of ``params`` ([(path, [values])]) and write sweep.json, sweep.csv and sweep.html into ``out``.

    Every point uses the scenario's seed (``seed`` replaces it), so points differ only by their parameters; with
    ``seeds=N`` each point runs seeds seed .. seed+N-1 and the metrics are the mean (and sample std) over them.
    ``overrides`` are ``--set`` strings applied before the parameters. Every point is validated first: a bad path
    or value raises ScenarioError before any run. A point whose run fails is recorded with its error and the
    sweep goes on. String stability is judged by ``criterion`` (``criteria.py``). ``scheduler``: run the points
    on a Dask cluster (``tcp://host:port`` or ``local``, see ``dask_runner``; ``shared_dir``: workers write in place
    there) instead of local processes; an
    interrupt leaves ``sweep.partial.json`` with the runs that finished. ``batch``: points that share a world's
    structure and seed run as copies in one world (``batched``; their plots and reports are not drawn), the
    others one process each; ``batching`` in the result says which. Returns what sweep.json holds."""
    text, source = scenario_text(scenario, source)
    params = [(str(p), list(v)) for p, v in params]
    metrics = tuple(dict.fromkeys((*metrics, criterion.metric)))  # the deciding ratio is always in the table
    plan = _plan(text, source, params, seeds, seed, overrides, stable_param)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tasks = _tasks(plan, out, seeds, source)
    worlds, alone, reasons = plan_batches(tasks, jobs, scheduler) if batch else ([], tasks, {"--no-batch": len(tasks)})
    records = _execute([*worlds, *alone], len(tasks), plan.points, out, jobs, console, scheduler, shared_dir)
    result_points, available = _point_results(plan.points, records, out, metrics, seeds is not None, tolerance,
                                              criterion)
    result: dict[str, Any] = {
        "scenario": plan.base.name,
        "source": source,
        "seed": plan.base.seed,
        "seeds": seeds or 1,
        "overrides": list(overrides),
        "grid": {p: v for p, v in params},
        "metrics": list(metrics),
        "aggregation": RULE + (f"; mean and sample std over {seeds} seeds" if seeds is not None else ""),
        "ok": all(p["status"] == "ok" for p in result_points),
        # metrics no run reported (a misspelt name), with the closest name the runs did report
        "missing_metrics": {m: next(iter(difflib.get_close_matches(m, sorted(available), n=1)), None)
                            for m in metrics if available and m not in available},
        "batching": batching_summary(worlds, alone, reasons),
        "points": result_points,
        "min_stable": min_stable(result_points, plan.stable_param, tolerance, criterion) if plan.stable_param
        else None,
        "criterion": {"name": criterion.name, "metric": criterion.metric, "rule": criterion.describe(tolerance),
                      "excitation": excitation_note(_leader_drive(plan.base), criterion)},
    }
    write_sweep(out, result)
    return result


@dataclass(frozen=True)
class _Plan:
    """A validated sweep: the base scenario, the grid's points and their scenarios, the parameter judged."""

    base: Scenario
    points: list[Point]
    scenarios: list[Scenario]
    stable_param: str | None


def _plan(text: str, source: str, params: list[tuple[str, list[Any]]], seeds: int | None, seed: int | None,
          overrides: Sequence[str], stable_param: str | None) -> _Plan:
    """Validate the grid and every point before anything runs (ScenarioError on the first bad one)."""
    if not params:
        raise ScenarioError(source, [Problem("", "a sweep needs at least one --param path=v1,v2,...")])
    check_params(params, source)
    if seeds is not None and seeds < 1:
        raise ScenarioError(source, [Problem("", f"--seeds must be at least 1, got {seeds}")])
    base = [*([f"seed={int(seed)}"] if seed is not None else []), *overrides]
    base_scenario = parse_scenario(text, source, base)
    points = grid_points(params, base_scenario.channel.type, base_scenario.channel_variants)
    scenarios = build_scenarios(text, source, base, points, swept=[p for p, _ in params])
    if stable_param is None:
        stable_param = next((p for p, values in params if all(is_number(v) for v in values)), None)
    elif stable_param not in dict(params):
        raise ScenarioError(source, [Problem(stable_param, "--stable-param must be one of the swept paths: "
                                                           f"{', '.join(p for p, _ in params)}")])
    return _Plan(base_scenario, points, scenarios, stable_param)


def _tasks(plan: _Plan, out: Path, seeds: int | None, source: str) -> list[Task]:
    """One run per point and seed replicate, each in its own directory under ``out``."""
    tasks = []
    for i, (sc, point) in enumerate(zip(plan.scenarios, plan.points, strict=True)):
        first = sc.seed  # a swept `seed` parameter wins over the scenario's
        run_seeds = [first + k for k in range(seeds)] if seeds is not None else [first]
        for k, s in enumerate(run_seeds):
            run_dir = out / point.name / f"seed={s}" if seeds is not None else out / point.name
            tasks.append(Task(i, k, sc, run_dir, s, source))
    return tasks


def _execute(tasks: list[Task | BatchTask], total: int, points: list[Point], out: Path, jobs: int, console: Any,
             scheduler: str | None, shared_dir: str | Path | None) -> list[Record]:
    """Run the tasks (locally or on a cluster), telling ``console`` as each finishes."""
    finished = [0]

    def report(record: Record) -> None:
        finished[0] += 1
        if console is not None:
            _say(console, record, points[record["point"]].name, finished[0], total)

    notify = None if console is None else (lambda m: console.print(m, highlight=False, markup=False))
    records = execute(tasks, jobs, report, scheduler=scheduler, shared_dir=shared_dir,
                      partial=out / "sweep.partial.json", notify=notify)
    (out / "sweep.partial.json").unlink(missing_ok=True)  # an earlier interrupted sweep's record is stale now
    return records


def _point_results(points: list[Point], records: list[Record], out: Path, metrics: tuple[str, ...], replicated: bool,
                   tolerance: float, criterion: Criterion) -> tuple[list[dict[str, Any]], set[str]]:
    """Each point's entry (its runs summarised and aggregated) and the metric names the runs reported."""
    available: set[str] = set()
    result_points = []
    for point, runs in zip(points, by_point(records, len(points)), strict=True):
        for r in runs:
            if r["status"] == "ok":
                summarise_run(r, run_outputs(r)[1], metrics, criterion)
                available.update(r.pop("available"))
            # run directories relative to the sweep directory, so the result can be moved
            r["dir"] = Path(r["dir"]).relative_to(out).as_posix()
            r.pop("point", None)
        entry: dict[str, Any] = {"name": point.name, "params": point.params, "dir": point.name,
                                 "seeds": [r["seed"] for r in runs]}
        aggregate_point(entry, runs, metrics, replicated, tolerance, criterion)
        entry["runs"] = runs
        result_points.append(entry)
    return result_points, available


def _leader_drive(scenario: Scenario) -> dict[str, Any]:
    """The first platoon's leader drive (the one the criterion's note speaks of)."""
    platoons = getattr(scenario, "platoons", None)
    drive = (platoons[0].leader if platoons and platoons[0].leader is not None else scenario.leader)
    return drive.model_dump(mode="json")


def _say(console: Any, record: Record, name: str, done: int, total: int) -> None:
    if record["status"] == "ok":
        status = f"ok ({record['sim_time_s']:.1f} s simulated in {record['wall_time_s']:.2f} s)"
    else:
        status = f"FAILED: {(record.get('error') or {}).get('message')}"
    console.print(f"  [{done}/{total}] {name} seed {record['seed']}: {status}", highlight=False, markup=False)


__all__ = ["DEFAULT_METRICS", "sweep"]
