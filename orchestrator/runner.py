"""Run one scenario into a run directory: traces, run.json, metrics.json, plots and report.html.

A run directory is the unit of result: everything in it can be derived again from ``scenario.resolved.yaml`` and
``run.json`` (seed, version).
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from core import __version__
from core.federate import FederateError
from core.ports import ContractError
from core.timebase import seconds_to_ns

from .build.world import build_world
from .engine.pacing import RealtimePacer
from .engine.run_control import RunControl
from .engine.scheduler import SchedulerError
from .metrics import DIGEST_TRACES, PLOT_POINTS, RunData, file_digest, json_safe, write_metrics
from .recording.port_recorder import DEFAULT_SKIP, PortRecorder
from .recording.recorder import VehicleRecorder
from .recording.safe_files import OutputPathError, check_outputs, is_disk_full, write_atomic
from .recording.tables import TraceWriteError
from .reporting.advisories import lateral_stability_notes
from .reporting.outcomes import run_outcomes, unmet_requests
from .reporting.plot_worker import PlotWorkers
from .reporting.scale_notes import scale_notes
from .scenario import Problem, Scenario, ScenarioError
from .scenario.loader import fully_resolved

RUN_FILES = ("scenario.resolved.yaml", "run.json", "metrics.json", "report.html", "run.mcap", "v2x.pcap")
RUN_DIRS = ("trace", "plots")
"""What a run writes into its directory (each checked for links before the run)."""

FROM_SCENARIO = "scenario"
"""``run_scenario(step_timeout_s=...)``: the watchdog the scenario sets (``execution.step_timeout_s``, 300 s unless
it says otherwise)."""


@dataclass
class RunResult:
    """What a run produced."""

    out_dir: Path
    run_info: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    error: FederateError | None = None
    interrupted: str | None = None  # the signal that stopped the run before its end
    run_json_error: OSError | None = None  # run.json could not be written (then it is absent, never cut short)

    @property
    def ok(self) -> bool:
        return self.error is None and self.interrupted is None

    @property
    def disk_full(self) -> bool:
        """Whether the run or its record stopped on a full disk (or quota)."""
        return is_disk_full(self.error) or is_disk_full(self.run_json_error)


def resolved_dict(scenario: Scenario, seed: int) -> dict[str, Any]:
    """The scenario after defaults, overrides and the seed: what ``scenario.resolved.yaml`` holds."""
    data = fully_resolved(scenario).model_dump(mode="json")
    data["seed"] = seed
    return data


def resolved_yaml(scenario: Scenario, seed: int) -> str:
    """The text of ``scenario.resolved.yaml``: ``resolved_dict`` as YAML, through libyaml's emitter when PyYAML has
    it (a tenth of the pure-Python emitter's time, the same text for every shipped scenario). A run alone and a
    batched point both write it through here, so their files are the same bytes."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(resolved_dict(scenario, seed), Dumper=dumper, sort_keys=False)


def run_scenario(
    scenario: Scenario,
    out_dir: Path,
    seed: int | None = None,
    progress: bool = False,
    source: str = "<scenario>",
    step_timeout_s: float | str | None = FROM_SCENARIO,
    extra_observers: Sequence[Any] = (),
) -> RunResult:
    """Simulate ``scenario`` and write the run directory. Scenario-level inconsistencies and an output directory
    that cannot be written raise ScenarioError (before anything runs); a failing federate, a trace that cannot be
    written and an interrupt (SIGINT, SIGTERM: the run stops at the next instant) are reported in the result, with
    the traces up to then kept. ``step_timeout_s``: longest a federate's step may take (None: no watchdog; by
    default the scenario's ``execution.step_timeout_s``).
    ``extra_observers``: more scheduler observers (the live view); they watch, they never change the run."""
    seed = scenario.seed if seed is None else seed
    if step_timeout_s == FROM_SCENARIO:
        step_timeout_s = scenario.execution.step_timeout_s
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        check_outputs(out_dir, RUN_FILES, RUN_DIRS)  # a directory used before: nothing is written through a link
        write_atomic(out_dir / "scenario.resolved.yaml", resolved_yaml(scenario, seed))
    except OutputPathError as exc:
        raise ScenarioError(source, [Problem("--out", str(exc))]) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ScenarioError(source, [Problem("--out", f"cannot write the run directory {out_dir}: {reason}")]) from None
    # started now, so the workers import matplotlib while the loop runs; stopped by pid whatever happens next
    workers = PlotWorkers.start() if scenario.outputs.plots and scenario.outputs.trace else None
    try:
        return _run(scenario, out_dir, seed, progress, source, step_timeout_s, extra_observers,  # type: ignore[arg-type]
                    workers)
    finally:
        if workers is not None:
            workers.close()


@dataclass
class _Simulated:
    """What the scheduler's run left: the world, how it ended and what the run control noted."""

    world: Any
    error: FederateError | None
    interrupted: str | None
    wall_s: float
    notes: list[str]


def _run(scenario: Scenario, out_dir: Path, seed: int, progress: bool, source: str, step_timeout_s: float | None,
         extra_observers: Sequence[Any], workers: PlotWorkers | None) -> RunResult:
    """The run of ``run_scenario`` once its directory is written."""
    sim = _simulate(scenario, out_dir, seed, progress, source, step_timeout_s, extra_observers)
    if isinstance(sim, RunResult):
        return sim
    run_info = _run_info(scenario, out_dir, seed, sim)
    result = RunResult(out_dir, run_info, error=sim.error, interrupted=sim.interrupted)
    run_info["robot_names"] = {str(r.id): r.name for r in sim.world.robots}
    now_ns = sim.world.scheduler.now_ns
    try:
        _write_run_outputs(scenario, out_dir, run_info, result, workers)
    except OSError as exc:  # a full disk after the run: say so in run.json (if that still fits)
        run_info["status"] = "failed"
        result.error = FederateError("outputs", now_ns, exc)
        run_info["error"] = {"federate": "outputs", "robot": None, "sim_time_s": now_ns / 1e9,
                             "message": str(result.error)}
    try:  # whole or not at all: a reader never finds a run.json cut short
        write_atomic(out_dir / "run.json", json.dumps(json_safe(run_info), indent=2))
    except OSError as exc:
        result.run_json_error = exc
    return result


def _simulate(scenario: Scenario, out_dir: Path, seed: int, progress: bool, source: str,
              step_timeout_s: float | None, extra_observers: Sequence[Any]) -> _Simulated | RunResult:
    """Build the world and run the scheduler; a RunResult when a plug-in failed to build (nothing ran)."""
    error: FederateError | None = None
    interrupted: str | None = None
    t0 = time.perf_counter()
    with RunControl(step_timeout_s) as control:  # from here on, an interrupt still ends with run.json
        try:
            world, observers = _build(scenario, out_dir, seed, source, progress, control)
        except FederateError as exc:  # a plug-in's constructor failed (sys.exit included): nothing ran
            return _failed_to_build(scenario, out_dir, seed, exc, time.perf_counter() - t0)
        world.scheduler.control = control
        execution = scenario.execution
        if execution.realtime is not None:
            world.scheduler.pacer = RealtimePacer(execution.realtime, execution.late_warning_s,
                                                  warn=lambda message: print(message, file=sys.stderr))
        try:
            world.scheduler.run([*observers, *extra_observers])
        except FederateError as exc:
            error = exc
        except TraceWriteError as exc:  # a full disk: stop, keep what was written
            error = FederateError("recorder", world.scheduler.now_ns, exc)
        except KeyboardInterrupt:  # a second signal while a step hung
            interrupted = control.stop_requested or "SIGINT"
        except (ContractError, SchedulerError) as exc:  # the federates as configured do not fit together
            raise ScenarioError(source, [Problem("federates", str(exc))]) from None
    # a signal after the last instant (while the federates finalize and the traces close) still stops the run: a
    # batch must not read the point as finished and start the next one
    interrupted = interrupted or world.scheduler.interrupted or control.stop_requested
    return _Simulated(world, error, interrupted, time.perf_counter() - t0, list(control.notes))


def _run_info(scenario: Scenario, out_dir: Path, seed: int, sim: _Simulated) -> dict[str, Any]:
    """run.json's content before the outputs: what ran, how fast, how it ended, its outcomes and notes."""
    world, error, interrupted, wall = sim.world, sim.error, sim.interrupted, sim.wall_s
    sim_s = world.scheduler.now_ns / 1e9
    stability = lateral_stability_notes(scenario, world.robots)
    run_info: dict[str, Any] = {
        "coopsim_version": __version__,
        "scenario": scenario.name,
        "seed": seed,
        "channel": scenario.channel.type,
        "controllers": sorted({r.controller.type for r in world.robots if r.controller is not None}),
        "robots": len(world.robots),
        "sim_time_s": sim_s,
        "wall_time_s": wall,
        "real_time_factor": sim_s / wall if wall > 0 else None,
        "steps": round(sim_s / scenario.step_s) + 1,
        "wall_time_by_federate_s": world.scheduler.wall_by_federate,
        "platform": {"python": sys.version.split()[0], "machine": platform.machine(), "system": platform.platform()},
        "status": "failed" if error is not None else "interrupted" if interrupted else "ok",
        "notes": [*stability, *scale_notes(scenario, world.robots), *sim.notes],
    }
    if interrupted:
        run_info["interrupted_by"] = interrupted
    _pacing_info(world.scheduler.pacer, run_info)
    physics = world.federates.get("physics")
    unmet = unmet_requests(world.federates)
    run_info["notes"] += unmet
    outcomes = run_outcomes(getattr(physics, "collisions", []), world.robots, world.scheduler.now_ns, out_dir,
                            stability, getattr(world.federates.get("v2x"), "logs_transmissions", False), unmet)
    run_info["outcomes"] = outcomes
    if run_info["status"] == "ok" and outcomes["collisions"]:
        run_info["status"] = "collided"  # the run completed, its metrics stand, but the platoon crashed
    summaries = federate_summaries(world.federates)
    if summaries:
        run_info["federates"] = summaries
    if error is not None:
        run_info["error"] = {"federate": error.federate, "robot": error.robot, "sim_time_s": error.t_ns / 1e9,
                             "message": str(error)}
    model_facts = _channel_model_facts(world.federates.get("v2x"))
    if model_facts:
        run_info["channel_model"] = model_facts
    return run_info


def _pacing_info(pacer: RealtimePacer | None, run_info: dict[str, Any]) -> None:
    """A real-time run's pacing summary, and a note when it could not keep up."""
    if pacer is None:
        return
    run_info["realtime"] = pacer.summary()
    if pacer.late_instants:
        run_info["notes"].append(
            f"the run could not keep up with {pacer.factor:g}x real time: {pacer.late_instants} of "
            f"{pacer.instants} instants finished more than {pacer.late_warning_s * 1e3:g} ms late (max "
            f"{pacer.max_late_s * 1e3:.1f} ms, first at t = {pacer.first_late_s:.3f} s)")


def _write_run_outputs(scenario: Scenario, out_dir: Path, run_info: dict[str, Any], result: RunResult,
                       workers: PlotWorkers | None) -> None:
    """Metrics, plots, report and MCAP of a finished run, and the digest of its traces (while plots draw). An
    interrupted or failed run gets only the digest: ``coopsim metrics RUN_DIR`` computes the rest later."""
    def digest() -> None:
        try:
            run_info["digest"] = file_digest(out_dir, DIGEST_TRACES)
        except (pa.ArrowException, OSError) as exc:  # a failed run's trace that could not be completed
            if result.ok:
                raise
            run_info["notes"].append(f"no digest: a trace cannot be read ({exc})")

    if not (result.ok and (out_dir / "trace" / "vehicles.parquet").exists()):
        digest()
        return
    # SIGINT or SIGTERM while the outputs are written: the plots not drawn by then are named, not awaited, and the
    # report and run.json are still written
    with RunControl(None) as outputs_control:
        result.metrics = write_outputs(RunData.load(out_dir), run_info, plots=scenario.outputs.plots,
                                       report=scenario.outputs.report, workers=workers, while_drawing=digest,
                                       stop=lambda: outputs_control.stop_requested)
    if outputs_control.stop_requested:
        result.interrupted = run_info["interrupted_by"] = outputs_control.stop_requested
        run_info["status"] = "interrupted"
    elif scenario.outputs.mcap:
        from .mcap_export.export import write_mcap

        write_mcap(out_dir)


def federate_summaries(federates: dict[str, Any]) -> dict[str, Any]:
    """What each federate that keeps counts says about the run (``run_summary()``: bridges' commands taken and
    malformed input ignored, the physics federate's external commands and timeouts)."""
    out: dict[str, Any] = {}
    for name, federate in federates.items():
        summary = getattr(federate, "run_summary", None)
        if callable(summary):
            try:
                value = summary()
            except KeyboardInterrupt:  # the user's Ctrl-C after the run (the run's handlers are gone by then)
                raise
            except BaseException as exc:  # a plug-in's broken summary (even sys.exit) must not lose the record
                value = {"error": f"{type(exc).__name__}: {exc}"}
            if value:
                out[name] = value
    return out


def _failed_to_build(scenario: Scenario, out_dir: Path, seed: int, error: FederateError, wall: float) -> RunResult:
    """The result, and ``run.json``, of a run whose federates could not all be built."""
    run_info: dict[str, Any] = {
        "coopsim_version": __version__, "scenario": scenario.name, "seed": seed, "channel": scenario.channel.type,
        "sim_time_s": 0.0, "wall_time_s": wall, "status": "failed", "notes": [],
        "error": {"federate": error.federate, "robot": error.robot, "sim_time_s": 0.0, "message": str(error)},
    }
    result = RunResult(out_dir, run_info, error=error)
    try:
        write_atomic(out_dir / "run.json", json.dumps(json_safe(run_info), indent=2))
    except OSError as exc:
        result.run_json_error = exc
    return result


def _build(scenario: Scenario, out_dir: Path, seed: int, source: str, progress: bool,
           control: RunControl | None = None) -> tuple[Any, list[Any]]:
    """The world and the observers of a run (recorders, progress bar)."""
    try:
        world = build_world(scenario, out_dir=out_dir, seed=seed, run_control=control)
    except ValueError as exc:
        raise ScenarioError(source, [Problem("vehicles", str(exc))]) from None
    observers: list[Any] = []
    trace_path = out_dir / "trace" / "vehicles.parquet"
    if scenario.outputs.trace:
        period = seconds_to_ns(scenario.outputs.trace_period_s or scenario.step_s)
        observers.append(VehicleRecorder(trace_path, period))
        # run.mcap shows each reception's decoded fields, so its runs also record cam_rx (left out by default)
        skip = DEFAULT_SKIP - {"cam_rx"} if scenario.outputs.mcap else DEFAULT_SKIP
        observers.append(PortRecorder(trace_path.parent, period, skip))
    if progress:
        from .reporting.progress import ProgressObserver

        observers.append(ProgressObserver(scenario.name))
    return world, observers


def write_outputs(run: RunData, run_info: dict[str, Any], plots: bool = True, report: bool = True,
                  workers: PlotWorkers | None = None, while_drawing: Callable[[], None] | None = None,
                  stop: Callable[[], str | None] | None = None) -> dict[str, Any]:
    """``metrics.json``, the plots and ``report.html`` of a run directory, from the directory alone. With
    ``workers`` the plots are drawn there, each as soon as its data is ready; a plot they could not draw is left
    out, named in ``run_info["notes"]``, on stderr and in the report. ``while_drawing``: more of the run's work
    (filling ``run_info``), done once every plot is sent and before the report is written. ``stop``: asked while
    the plots are drawn; once it names a signal, the plots not drawn by then are left out and named the same way."""
    from .metrics.transitions import roles_json
    from .reporting.plots import follower_plot_jobs, ordered, series_plot_jobs

    plot_dir = run.out_dir / "plots"
    workers = workers if plots else None
    series: dict[int, Any] = {}
    if plots or report:
        stride = max(1, run.vehicle_rows() // max(len(run.robots), 1) // PLOT_POINTS)
        series = run.series([r.id for r in run.robots], ("x", "y", "v", "est_x", "est_y"), stride)
    early = series_plot_jobs(run.robots, series, roles_json(run)) if workers is not None else []
    if workers is not None:  # drawn while the metrics are computed
        workers.submit(plot_dir, early)
    metrics, follower_series = write_metrics(run)
    drawn: list[Path] = []
    missing: dict[str, str] = {}
    if workers is not None:
        from .reporting.v2x_plots import v2x_plot_jobs

        late = follower_plot_jobs(run.robots, follower_series, metrics["followers"], metrics)
        v2x = v2x_plot_jobs(run)
        workers.submit(plot_dir, [*late, *v2x], waiting=True)
    elif plots:
        from .reporting import v2x_plots
        from .reporting.plots import DRAWERS, draw_job, run_plot_jobs

        for job in [*run_plot_jobs(run.robots, series, follower_series, metrics["followers"], metrics),
                    *v2x_plots.v2x_plot_jobs(run)]:
            if stop is not None and (why := stop()):
                missing[job.file] = f"not drawn: the run was stopped by {why} while drawing"
            else:
                drawn.append(draw_job(plot_dir, job, {**DRAWERS, **v2x_plots.DRAWERS}))
    if while_drawing is not None:
        while_drawing()
    charts: list[tuple[str, str]] = []
    if report:
        from .reporting.report import interactive_sections

        charts = interactive_sections(run.robots, series, follower_series)
    if workers is not None:
        done, missing = workers.finish(stop=stop)
        drawn = [plot_dir / job.file for job in [*ordered([*early, *late]), *v2x] if job.file in done]
    if report:
        from .reporting.report import write_run_report

        write_run_report(run.out_dir, run_info, metrics, drawn, run.robots, charts, missing)
    if missing:
        note = "plots not drawn: " + "; ".join(f"{file} ({why})" for file, why in missing.items())
        run_info.setdefault("notes", []).append(note)
        print(f"warning: {note}", file=sys.stderr)
    return metrics


def _channel_model_facts(v2x: Any) -> dict[str, Any]:
    """What the channel model reports about itself (frame sizes, codec self-checks): facts of this run for
    ``run.json``, not metrics (those come from the traces)."""
    if v2x is None or not hasattr(v2x, "metrics"):
        return {}
    facts = v2x.metrics()
    return {k: facts[k] for k in ("frame_bytes", "codec_checked") if k in facts}
