"""Every registered metric, built-in or installed, runs through its contract on a real run directory (ITS-G5, so
every trace exists): it returns a mapping of JSON-ready values (finite numbers, None, strings, lists and dicts of
them), includes the keys it shows in reports, and gives the same answer twice. Broken metrics fail the check."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from orchestrator.metrics import METRICS, FollowerView, Metric, RunData, follower_metric, run_metric
from orchestrator.metrics.follower import follower_views
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> RunData:
    out = tmp_path_factory.mktemp("itsg5")
    scenario = load_scenario(REPO / "scenarios" / "platoon_track.yaml",
                             overrides=["duration_s=6", "outputs.plots=false", "outputs.report=false"])
    assert run_scenario(scenario, out).ok
    return RunData.load(out)


def _json_ready(value: Any, where: str) -> None:
    if value is None or isinstance(value, bool | str | int):
        return
    if isinstance(value, float):
        assert math.isfinite(value), f"{where} is {value}: report None instead of a non-finite number"
        return
    if isinstance(value, list | tuple):
        for k, item in enumerate(value):
            _json_ready(item, f"{where}[{k}]")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            assert isinstance(key, str), f"{where} has a key {key!r} that is not a string"
            _json_ready(item, f"{where}.{key}")
        return
    raise AssertionError(f"{where} is a {type(value).__name__}, not a JSON value")


def check_metric(metric: Any, run: RunData) -> None:
    """The contract of one metric (raises AssertionError naming what is wrong)."""
    assert isinstance(metric, Metric), f"{metric!r} is not a Metric (declare it with @follower_metric/@run_metric)"
    if metric.scope == "follower":
        views = follower_views(run, {})
        assert views, "the run has no follower to measure"
        outputs = [(f"follower {v.robot.name}", metric.compute(v), metric.compute(v)) for v in views]
    else:
        followers = {v.robot.name: {} for v in follower_views(run, {})}
        outputs = [("run", metric.compute(run, followers), metric.compute(run, followers))]
    for where, out, again in outputs:
        if out is None:
            continue
        assert isinstance(out, Mapping), f"{metric.name} ({where}) returned a {type(out).__name__}, not a mapping"
        _json_ready(dict(out), f"{metric.name} ({where})")
        missing = [k for k in metric.report if k not in out] if metric.scope == "follower" else []
        assert not missing, f"{metric.name} ({where}) does not return its report keys {missing}"
        assert repr(out) == repr(again), f"{metric.name} ({where}) differs between two calls on the same run"


@pytest.mark.parametrize("name", METRICS.names())
def test_every_metric_keeps_its_contract(name: str, run: RunData) -> None:
    check_metric(METRICS.get(name), run)


# -- the check bites -----------------------------------------------------------------------------------------------
@follower_metric("nan_gap")
def nan_gap(view: FollowerView) -> dict[str, Any]:
    """Reports NaN where it should report None."""
    return {"gap_nan": float("nan")}


@follower_metric("array_gap")
def array_gap(view: FollowerView) -> dict[str, Any]:
    """Returns a numpy array: not a JSON value."""
    return {"gaps": view.bumper_gap}


@follower_metric("forgets_report", report=("shown_m",))
def forgets_report(view: FollowerView) -> dict[str, Any]:
    """Promises a report column it never returns."""
    return {"other_m": 1.0}


_CALLS = iter(range(1_000_000))


@run_metric("restless", section="restless")
def restless(run: RunData, followers: Mapping[str, Any]) -> dict[str, Any]:
    """A different answer on every call."""
    return {"calls": next(_CALLS)}


def not_a_metric(view: FollowerView) -> dict[str, Any]:
    return {}


BROKEN: list[tuple[str, str]] = [
    ("nan_gap", r"gap_nan is nan"),
    ("array_gap", r"gaps is a ndarray"),
    ("forgets_report", r"does not return its report keys \['shown_m'\]"),
    ("restless", r"differs between two calls"),
    ("not_a_metric", r"is not a Metric"),
]


@pytest.fixture
def registered() -> Iterator[Callable[[str], None]]:
    names: list[str] = []

    def register(name: str) -> None:
        METRICS.register(name, f"{__name__}:{name}")
        names.append(name)

    yield register
    for name in names:
        METRICS.unregister(name)


@pytest.mark.parametrize(("name", "message"), BROKEN)
def test_a_broken_metric_fails_the_check(name: str, message: str, run: RunData, registered) -> None:
    registered(name)
    assert name in METRICS.names()  # the parametrised contract test would run it
    with pytest.raises(AssertionError, match=message):
        check_metric(METRICS.get(name), run)
