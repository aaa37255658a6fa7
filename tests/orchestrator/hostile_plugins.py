"""Plug-in federates that try to decide more than their own outputs: write into their inputs by force, publish
wrong shapes, end the process, leave threads or take the signal handlers (``type:
tests.orchestrator.hostile_plugins:Name``). Each waits until ``at_s`` (simulated) before misbehaving."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, Input, SetupContext
from core.ports import port
from core.timebase import seconds_to_ns

SPEEDS = port("speeds", {"v_kmh": "km/h"}, doc="each robot's speed in km/h", finite=True)
EVENTS = port("blips", {"robot": ("int64", "robot id"), "level": "-"}, index="event", doc="an event table")


class _Hostile(Federate):
    """Reads the state every 50 ms and publishes ``speeds``; from ``at_s`` on does what its subclass does."""

    outputs: tuple = (SPEEDS,)

    def __init__(self, name: str, at_s: float = 0.5, marker: str = "") -> None:
        super().__init__(name)
        self.at_ns = seconds_to_ns(at_s)
        self.marker = Path(marker) if marker else None

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state"),), outputs=self.outputs, period_ns=seconds_to_ns(0.05))

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Any:
        state = inputs["state"]
        good = {"speeds": {"id": state["id"], "v_kmh": state["v"] * 3.6}}
        return self.wrong(state, good) if t_ns >= self.at_ns else good

    def wrong(self, state: Mapping[str, Any], good: dict) -> Any:
        raise NotImplementedError


# -- item 1: writing into read-only inputs by force ---------------------------------------------------------------
class Unfreezer(_Hostile):
    """Makes its ``state.x`` writable again and shifts it by 1 km."""

    def wrong(self, state, good):
        x = state["x"]
        x.flags.writeable = True
        x += 1000.0
        return good


class BaseWriter(_Hostile):
    """Writes NaN through the ``base`` of its ``state.x``."""

    def wrong(self, state, good):
        state["x"].base[...] = np.nan
        return good


class Hoarder(_Hostile):
    """Keeps the arrays it published and writes NaN into them one step later (after the recorder saw them)."""

    def __init__(self, name: str, at_s: float = 0.5, marker: str = "") -> None:
        super().__init__(name, at_s, marker)
        self.kept: list[np.ndarray] = []

    def wrong(self, state, good):
        for column in self.kept:
            column[...] = np.nan
        self.kept = [good["speeds"]["v_kmh"]]
        return good


# -- item 2: wrong shapes ----------------------------------------------------------------------------------------
class ExtraRows(_Hostile):
    """Publishes three more rows than there are robots, in ``id`` and in the field alike."""

    def wrong(self, state, good):
        n = len(state["id"]) + 3
        return {"speeds": {"id": np.arange(n, dtype=np.int64), "v_kmh": np.zeros(n)}}


class WideField(_Hostile):
    """Publishes a field of shape (n, 2)."""

    def wrong(self, state, good):
        v = good["speeds"]["v_kmh"]
        return {"speeds": {"id": state["id"], "v_kmh": np.stack([v, v], axis=1)}}


class ColumnIds(_Hostile):
    """Publishes ``id`` of shape (n, 1)."""

    def wrong(self, state, good):
        return {"speeds": {"id": state["id"].reshape(-1, 1), "v_kmh": good["speeds"]["v_kmh"]}}


class WideEvents(_Hostile):
    """Publishes an event table whose second column is (n, 2)."""

    outputs = (SPEEDS, EVENTS)

    def wrong(self, state, good):
        n = len(state["id"])
        return {**good, "blips": {"robot": state["id"].copy(), "level": np.zeros((n, 2))}}


class UntypedWide(Federate):
    """Declares its port by name only and publishes a 2-d column on it."""

    def __init__(self, name: str, at_s: float = 0.5) -> None:
        super().__init__(name)
        self.at_ns = seconds_to_ns(at_s)

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state"),), outputs=("loose",), period_ns=seconds_to_ns(0.05))

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Any:
        state = inputs["state"]
        v = np.asarray(state["v"])
        value = np.stack([v, v], axis=1) if t_ns >= self.at_ns else v.copy()
        return {"loose": {"id": state["id"], "v": value}}


# -- item 3: deciding the exit ----------------------------------------------------------------------------------
class _Custom(BaseException):
    """Not an Exception: what ``except Exception`` does not catch."""


class Exits(_Hostile):
    """``sys.exit(code)`` in its step."""

    def __init__(self, name: str, at_s: float = 0.5, code: int = 3) -> None:
        super().__init__(name, at_s)
        self.code = code

    def wrong(self, state, good):
        sys.exit(self.code)


class ExitsInSetup(_Hostile):
    """``sys.exit(0)`` in its setup."""

    def setup(self, ctx: SetupContext) -> FederateMeta:
        sys.exit(0)


class ExitsInInit(_Hostile):
    """``sys.exit(0)`` when it is built."""

    def __init__(self, name: str, at_s: float = 0.5) -> None:
        sys.exit(0)


class RaisesBase(_Hostile):
    """Raises a ``BaseException`` subclass."""

    def wrong(self, state, good):
        raise _Custom("not an Exception")


class RaisesInterrupt(_Hostile):
    """Raises ``KeyboardInterrupt`` itself (nobody pressed Ctrl-C)."""

    def wrong(self, state, good):
        raise KeyboardInterrupt


class ExitsInFinalize(_Hostile):
    """Runs normally, then ``sys.exit(4)`` in finalize."""

    def wrong(self, state, good):
        return good

    def finalize(self) -> None:
        sys.exit(4)


def _write_whole(path: Path, text: str) -> None:
    """Write ``path`` so that a reader sees it absent or complete, never empty (tests wait for it to appear)."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    os.replace(part, path)


def _fork_holder(marker: Path | None) -> None:
    """Fork a process that keeps every descriptor of the run open for a minute, as a helper a plug-in forks would
    (the plot worker's stdin among them); its pid goes to ``marker``."""
    pid = os.fork()
    if pid == 0:
        time.sleep(60)  # its whole life; the tests end it sooner
        os._exit(0)
    if marker is not None:
        _write_whole(marker, str(pid))


class HardExit(_Hostile):
    """Forks a holder of the run's descriptors (``marker``: its pid), then ``os._exit(0)``: ends the process where
    it stands."""

    def wrong(self, state, good):
        _fork_holder(self.marker)
        os._exit(0)


class ForksHolder(_Hostile):
    """Forks a holder of the run's descriptors once (``marker``: its pid), then steps on slowly: a run that is
    still going when the test kills it."""

    def wrong(self, state, good):
        if not hasattr(self, "forked"):
            self.forked = True
            _fork_holder(self.marker)
        threading.Event().wait(0.01)
        return good


class LeavesThread(_Hostile):
    """Starts a non-daemon thread that waits for an event nobody sets (it would hold the process at exit); writes
    ``marker`` once the thread runs."""

    def wrong(self, state, good):
        if not hasattr(self, "thread"):
            forever = threading.Event()
            self.thread = threading.Thread(target=forever.wait, name="plugin-leftover", daemon=False)
            self.thread.start()
            if self.marker is not None:
                _write_whole(self.marker, "started")
        return good


class IgnoresSigint(_Hostile):
    """Sets SIGINT and SIGTERM to ignored once, writes ``marker`` one step later and steps on slowly: a run that can
    only be stopped if the orchestrator took its handlers back in between."""

    def wrong(self, state, good):
        if not hasattr(self, "ignored"):
            self.ignored = True
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif self.marker is not None and not self.marker.exists():
            _write_whole(self.marker, "ignoring")
        threading.Event().wait(0.01)  # a run that lasts while the test signals it
        return good
