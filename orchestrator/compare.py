"""Run one scenario once per channel model on the same seed and compare (``coopsim compare``)."""

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
from .runner import _read_traces, run_scenario
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


def _run_one(args: tuple[Scenario, str, Path, int | None, str]) -> dict[str, Any]:
    scenario, channel, out, seed, source = args
    result = run_scenario(with_channel(scenario, channel), out / channel, seed=seed, source=source)
    return {"channel": channel, "ok": result.ok, "run": result.run_info, "metrics": result.metrics}


def compare_channels(
    scenario: Scenario,
    channels: list[str],
    out: Path,
    seed: int | None = None,
    jobs: int = 0,
    source: str = "<scenario>",
    console: Any = None,
) -> dict[str, Any]:
    """Run every channel (in parallel processes when cores allow) and write comparison.json/.html."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seed = scenario.seed if seed is None else seed
    for channel in channels:
        with_channel(scenario, channel)  # fail early on an unknown channel name
    workers = min(len(channels), jobs or os.cpu_count() or 1)
    tasks = [(scenario, c, out, seed, source) for c in channels]
    results: dict[str, dict[str, Any]] = {}
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for res in pool.map(_run_one, tasks):
                results[res["channel"]] = res
                _say(console, res)
    else:
        for task in tasks:
            res = _run_one(task)
            results[res["channel"]] = res
            _say(console, res)
    summary = _summary(results, channels)
    comparison = {
        "scenario": scenario.name,
        "seed": seed,
        "channels": channels,
        "ok": all(r["ok"] for r in results.values()),
        "summary": summary,
        "differences": _differences(summary, channels),
        "runs": {c: {"run": results[c]["run"], "metrics": results[c]["metrics"]} for c in channels},
    }
    (out / "comparison.json").write_text(json.dumps(comparison, indent=2), encoding="utf-8")
    _write_html(out, comparison)
    return comparison


def _say(console: Any, res: dict[str, Any]) -> None:
    if console is None:
        return
    run = res["run"]
    status = "ok" if res["ok"] else f"FAILED: {run.get('error', {}).get('message')}"
    console.print(f"  {res['channel']:>8}: {status} ({run['sim_time_s']:.1f} s simulated in "
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
def _first_follower(run: dict[str, Any], out: Path) -> tuple[int, int] | None:
    resolved = out / "scenario.resolved.yaml"
    names = run.get("robot_names", {})
    if len(names) < 2 or not resolved.exists():
        return None
    ids = sorted(int(k) for k in names)
    return ids[1], ids[0]  # first follower of the first platoon and its leader


def _write_html(out: Path, comparison: dict[str, Any]) -> None:
    channels = comparison["channels"]
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
    pair = _first_follower(comparison["runs"][channels[0]]["run"], out / channels[0])
    if pair is not None:
        follower, leader = pair
        path = _plot_received_speed(plots_dir, traces, channels, follower, leader)
        if path:
            sections.append(("Leader speed as the first follower received it", image(path)))
        path = _plot_histograms(plots_dir, traces, channels, follower, leader)
        if path:
            sections.append(("Latency and inter-reception interval (leader -> first follower)", image(path)))
    for c in channels:
        followers = comparison["runs"][c]["metrics"].get("followers", {})
        cols = [k for k in SUMMARY_KEYS if any(f.get(k) is not None for f in followers.values())]
        sections.append((f"Followers with channel {c}", table(followers, cols)))
    meta = f"scenario <b>{comparison['scenario']}</b> · seed {comparison['seed']} · channels {', '.join(channels)}"
    (out / "comparison.html").write_text(page("coopsim: channel comparison", sections, meta), encoding="utf-8")


def _plot_received_speed(plots_dir: Path, traces: dict[str, Any], channels: list[str], follower: int,
                         leader: int) -> Path | None:
    fig, ax = plt.subplots(figsize=(8, 4))
    truth_drawn = False
    for c in channels:
        vehicles = traces[c].get("vehicles")
        if vehicles is None:
            continue
        series = split_by_robot(vehicles)
        if not truth_drawn and leader in series:
            s = series[leader]
            ax.plot(s.t_ns / 1e9, s.cols["v"], color="k", lw=2.0, alpha=0.35, label="leader speed (truth)")
            truth_drawn = True
        if follower in series and "pred_v" in series[follower].cols:
            s = series[follower]
            ax.step(s.t_ns / 1e9, s.cols["pred_v"], where="post", lw=1.0, label=f"received via {c}")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("speed [m/s]")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = plots_dir / "received_leader_speed.png"
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


__all__ = ["compare_channels", "fmt", "with_channel"]
