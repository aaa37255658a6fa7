"""Run one scenario in several variants on the same seed and compare (``coopsim compare``).

Variants are either channel models (``--channels ideal,itsg5``: everything else identical) or fidelities
(``--fidelity theory,full``: unicycles with ground truth over an ideal channel, against dynamic vehicles with
odometry-based estimates over ITS-G5).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from .metrics import split_by_robot
from .report import fmt, image, page, table
from .runner import _read_traces, json_safe, run_scenario
from .scenario.model import ChannelBlock, Scenario

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
_LOWEST_IS_WORST = {"min_gap_m", "pdr"}


def with_channel(scenario: Scenario, channel: str) -> Scenario:
    """The scenario with its channel replaced (the scenario's own block is kept when it names that channel)."""
    block = scenario.channel if scenario.channel.type == channel else ChannelBlock(type=channel)
    return scenario.model_copy(update={"channel": block})


FIDELITIES: dict[str, dict[str, str]] = {
    # the controllers' design model: unicycles, exact state, ideal channel (the leader's inputs arrive unchanged)
    "theory": {"model": "unicycle", "physics.estimate": "ground_truth", "channel.type": "ideal",
               "controller.predict": "none"},
    # the physical robot: dynamic single track with tyres, odometry-based estimate, ITS-G5 CAMs
    "full": {"model": "dynamic", "physics.estimate": "odometry", "channel.type": "itsg5"},
}


def with_fidelity(scenario: Scenario, fidelity: str) -> Scenario:
    """The scenario at a fidelity of ``FIDELITIES`` (the vehicle model is set for every robot)."""
    from .scenario.loader import override_scenario

    try:
        settings = FIDELITIES[fidelity]
    except KeyError:
        raise ValueError(f"unknown fidelity '{fidelity}'; allowed: {', '.join(FIDELITIES)}") from None
    overrides = [f"{k}={v}" for k, v in settings.items() if k != "model"]
    if isinstance(scenario.vehicles, list):
        overrides += [f"vehicles[{i}].vehicle.model={settings['model']}" for i in range(len(scenario.vehicles))]
    else:
        overrides.append(f"vehicles.template.model={settings['model']}")
        overrides += [f"vehicles.overrides.{name}.vehicle.model={settings['model']}"
                      for name, entry in scenario.vehicles.overrides.items() if entry.vehicle is not None]
    overrides.remove(f"channel.type={settings['channel.type']}")
    scenario = with_channel(scenario, settings["channel.type"])  # a new channel type starts from its defaults
    return override_scenario(scenario, overrides)


def _run_one(args: tuple[Scenario, str, Path, int | None, str]) -> dict[str, Any]:
    scenario, name, out, seed, source = args
    result = run_scenario(scenario, out / name, seed=seed, source=source)
    return {"variant": name, "ok": result.ok, "run": result.run_info, "metrics": result.metrics}


def compare(
    scenario: Scenario,
    kind: str,
    names: list[str],
    out: Path,
    seed: int | None = None,
    jobs: int = 0,
    source: str = "<scenario>",
    console: Any = None,
) -> dict[str, Any]:
    """Run the scenario once per channel model (``kind="channel"``) or per fidelity (``kind="fidelity"``,
    see ``FIDELITIES``) and write comparison.json/.html."""
    from comms_models import COMMS_MODELS

    from .scenario import Problem, ScenarioError

    allowed = COMMS_MODELS.names() if kind == "channel" else list(FIDELITIES)
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise ScenarioError(source, [Problem(f"--{'channels' if kind == 'channel' else 'fidelity'}",
                                             f"unknown {kind} {', '.join(map(repr, unknown)) or '(none given)'}; "
                                             f"allowed: {', '.join(allowed)}")])
    make = {"channel": with_channel, "fidelity": with_fidelity}[kind]
    variants = {name: make(scenario, name) for name in names}
    return compare_variants(scenario, variants, out, kind, seed, jobs, source, console)


def compare_variants(
    scenario: Scenario,
    variants: dict[str, Scenario],
    out: Path,
    kind: str,
    seed: int | None = None,
    jobs: int = 0,
    source: str = "<scenario>",
    console: Any = None,
) -> dict[str, Any]:
    """Run every variant (in parallel processes when cores allow) on the same seed; write comparison files."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seed = scenario.seed if seed is None else seed
    channels = list(variants)
    workers = min(len(channels), jobs or os.cpu_count() or 1)
    tasks = [(variants[c], c, out, seed, source) for c in channels]
    results: dict[str, dict[str, Any]] = {}
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for res in pool.map(_run_one, tasks):
                results[res["variant"]] = res
                _say(console, res)
    else:
        for task in tasks:
            res = _run_one(task)
            results[res["variant"]] = res
            _say(console, res)
    summary = _summary(results, channels)
    comparison = {
        "scenario": scenario.name,
        "seed": seed,
        "kind": kind,
        "variants": channels,
        "ok": all(r["ok"] for r in results.values()),
        "summary": summary,
        "differences": _differences(summary, channels),
        "runs": {c: {"run": results[c]["run"], "metrics": results[c]["metrics"]} for c in channels},
    }
    (out / "comparison.json").write_text(json.dumps(json_safe(comparison), indent=2), encoding="utf-8")
    _write_html(out, comparison)
    return comparison


def _say(console: Any, res: dict[str, Any]) -> None:
    if console is None:
        return
    run = res["run"]
    status = "ok" if res["ok"] else f"FAILED: {run.get('error', {}).get('message')}"
    console.print(f"  {res['variant']:>8}: {status} ({run['sim_time_s']:.1f} s simulated in "
                  f"{run['wall_time_s']:.2f} s)", highlight=False)


def _worst(followers: dict[str, dict[str, Any]], key: str) -> float | None:
    values = [f[key] for f in followers.values() if f.get(key) is not None]
    if not values:
        return None
    return float(min(values) if key in _LOWEST_IS_WORST else max(values))


def _summary(results: dict[str, dict[str, Any]], channels: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for key in SUMMARY_KEYS:
        out[key] = {c: _worst(results[c]["metrics"].get("followers", {}), key) for c in channels}
    for key in ("cbr_mean", "cbr_max"):
        values = {c: results[c]["metrics"].get("channel", {}).get(key) for c in channels}
        if any(v is not None for v in values.values()):
            out[key] = values
    return out


def _differences(summary: dict[str, dict[str, Any]], channels: list[str]) -> dict[str, dict[str, Any]]:
    """Each channel minus the first one, per summary metric."""
    base = channels[0]
    diffs: dict[str, dict[str, Any]] = {}
    for key, values in summary.items():
        diffs[key] = {
            c: (values[c] - values[base]) if values.get(c) is not None and values.get(base) is not None else None
            for c in channels[1:]
        }
    return diffs


# -- report -----------------------------------------------------------------------------------------------------
def _chain(run: dict[str, Any], n: int = 3) -> list[tuple[int, int]]:
    """(follower, predecessor) ids along the first platoon, up to ``n`` links."""
    ids = sorted(int(k) for k in run.get("robot_names", {}))
    return [(ids[i], ids[i - 1]) for i in range(1, min(len(ids), n + 1))]


def _write_html(out: Path, comparison: dict[str, Any]) -> None:
    channels = comparison["variants"]
    plots_dir = out / "plots"
    plots_dir.mkdir(exist_ok=True)
    sections = []
    rows = {k: {c: v.get(c) for c in channels} for k, v in comparison["summary"].items()}
    for key, diff in comparison["differences"].items():
        for c, d in diff.items():
            rows[key][f"{c} - {channels[0]}"] = d
    columns = [*channels, *(f"{c} - {channels[0]}" for c in channels[1:])]
    sections.append(("Platoon metrics (worst follower)", table(rows, columns, first="metric")))
    traces = {c: _read_traces(out / c) for c in channels}
    links = _chain(comparison["runs"][channels[0]]["run"])
    if links:
        path = _plot_received_speed(plots_dir, traces, channels, links)
        sections.append(("Predecessor speed as each follower received it, against the truth", image(path)))
        follower, leader = links[0]
        path = _plot_histograms(plots_dir, traces, channels, follower, leader)
        if path:
            sections.append(("Latency and inter-reception interval (leader -> first follower)", image(path)))
    for c in channels:
        followers = comparison["runs"][c]["metrics"].get("followers", {})
        cols = [k for k in SUMMARY_KEYS if any(f.get(k) is not None for f in followers.values())]
        sections.append((f"Followers with channel {c}", table(followers, cols)))
    overlay = _plot_overlay(plots_dir, traces, channels)
    if overlay is not None:
        sections.insert(1, ("Trajectories and speeds of all vehicles, overlaid", image(overlay)))
    meta = (f"scenario <b>{comparison['scenario']}</b> · seed {comparison['seed']} · "
            f"{comparison['kind']}: {', '.join(channels)}")
    title = f"coopsim: {comparison['kind']} comparison"
    (out / "comparison.html").write_text(page(title, sections, meta), encoding="utf-8")


def _plot_overlay(plots_dir: Path, traces: dict[str, Any], variants: list[str]) -> Path | None:
    """Every vehicle's path and speed, one line style per variant, one colour per robot."""
    series = {v: split_by_robot(traces[v]["vehicles"]) for v in variants if "vehicles" in traces[v]}
    if not series:
        return None
    fig, (ax_xy, ax_v) = plt.subplots(1, 2, figsize=(11, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    for k, (variant, robots) in enumerate(series.items()):
        for j, (rid, s) in enumerate(sorted(robots.items())[:8]):
            color, style = colors[j % len(colors)], styles[k % len(styles)]
            label = f"robot {rid} ({variant})"
            ax_xy.plot(s.cols["x"], s.cols["y"], style, color=color, lw=1.1, label=label)
            ax_v.plot(s.t_ns / 1e9, s.cols["v"], style, color=color, lw=1.1, label=label)
    ax_xy.set_xlabel("x east [m]")
    ax_xy.set_ylabel("y north [m]")
    ax_xy.set_aspect("equal", adjustable="datalim")
    ax_v.set_xlabel("time [s]")
    ax_v.set_ylabel("speed [m/s]")
    for ax in (ax_xy, ax_v):
        ax.grid(alpha=0.3)
    ax_v.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    path = plots_dir / "overlay_trajectories_speeds.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_received_speed(plots_dir: Path, traces: dict[str, Any], channels: list[str],
                         links: list[tuple[int, int]]) -> Path:
    """One panel per link: the predecessor's true speed and the speed the follower's controller held, per
    channel (delay, update rate and quantisation steps show as the staircase)."""
    fig, axes = plt.subplots(len(links), 1, figsize=(8, 2.6 * len(links)), sharex=True, squeeze=False)
    series = {c: split_by_robot(traces[c]["vehicles"]) for c in channels if "vehicles" in traces[c]}
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (follower, pred) in zip(axes[:, 0], links, strict=True):
        for k, (c, s) in enumerate(series.items()):
            color = colors[k % len(colors)]
            if pred in s:
                ax.plot(s[pred].t_ns / 1e9, s[pred].cols["v"], color=color, lw=2.5, alpha=0.3,
                        label=f"truth ({c} run)")
            if follower in s and "pred_v" in s[follower].cols:
                f = s[follower]
                ax.step(f.t_ns / 1e9, f.cols["pred_v"], where="post", color=color, lw=1.0,
                        label=f"received via {c}")
        ax.set_ylabel(f"v of robot {pred} [m/s]", fontsize=8)
        ax.set_title(f"as received by robot {follower}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[-1, 0].set_xlabel("time [s]")
    fig.tight_layout()
    path = plots_dir / "received_predecessor_speed.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_histograms(plots_dir: Path, traces: dict[str, Any], channels: list[str], follower: int,
                     leader: int) -> Path | None:
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    drawn = False
    for c in channels:
        v2x = traces[c].get("v2x")
        if v2x is None:
            continue
        ok = (v2x["event"] == "rx") & (v2x["sender"] == leader) & (v2x["receiver"] == follower) & (
            v2x["outcome"] == "received")
        if not ok.any():
            continue
        latency = np.asarray(v2x["latency_s"])[ok] * 1e3
        intervals = np.diff(np.sort(np.asarray(v2x["t_ns"])[ok])) / 1e6
        axes[0].hist(latency, bins=40, alpha=0.6, label=c)
        axes[1].hist(intervals, bins=40, alpha=0.6, label=c)
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    axes[0].set_xlabel("latency [ms]")
    axes[1].set_xlabel("interval between receptions [ms]")
    for ax in axes:
        ax.set_ylabel("count")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = plots_dir / "latency_interval_histograms.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["FIDELITIES", "compare", "compare_variants", "fmt", "with_channel", "with_fidelity"]
