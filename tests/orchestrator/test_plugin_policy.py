"""A scenario never makes coopsim run code it did not mean to: a registry returns only subclasses of its base,
checked before anything is called, and ``--no-plugins`` (or COOPSIM_NO_PLUGINS=1) allows built-ins only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controllers import CONTROLLERS
from core.registry import NO_PLUGINS_ENV, UnknownNameError

REPO = Path(__file__).resolve().parents[2]
PLATOON = (REPO / "scenarios" / "platoon.yaml").read_text()


def _coopsim(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_callable_named_as_a_federate_is_refused_before_anything_runs(tmp_path):
    # the federate's name would be the callable's argument: a command creating a file in the working directory (a
    # name holding a path is refused for that alone)
    marker = REPO / f"pwned-{tmp_path.name}"
    path = tmp_path / "evil.yaml"
    path.write_text(PLATOON + f"federates:\n  - {{name: 'touch {marker.name}', type: 'os:system'}}\n")
    for command in ("validate", "run"):
        done = _coopsim(command, str(path), *(["--out", str(tmp_path / "run")] if command == "run" else []))
        assert done.returncode == 2, done.stderr
        assert "federate 'os:system' is not a Federate subclass (it is a builtin_function_or_method)" in done.stderr
        assert "Traceback" not in done.stderr
    assert not marker.exists()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["flag", "environment"])
def test_no_plugins_allows_built_ins_only(tmp_path, how):
    path = tmp_path / "plugin.yaml"
    path.write_text(PLATOON.replace("type: ela_cacc", "type: 'controllers.ela_cacc:ElaCacc'"))
    assert _coopsim("validate", str(path)).returncode == 0  # a law by its path: fine while plug-ins are on
    args, env = (["--no-plugins"], None) if how == "flag" else ([], {NO_PLUGINS_ENV: "1"})
    done = _coopsim(*args, "validate", str(path), env=env)
    assert done.returncode == 2 and "plug-ins are off" in done.stderr, done.stderr
    shipped = _coopsim(*args, "validate", "scenarios/platoon.yaml", env=env)
    assert shipped.returncode == 0, shipped.stderr  # built-ins still work


def test_the_registry_refuses_paths_while_plugins_are_off(monkeypatch):
    monkeypatch.setenv(NO_PLUGINS_ENV, "1")
    with pytest.raises(UnknownNameError, match="plug-ins are off"):
        CONTROLLERS.get("controllers.acc:Acc")
    assert CONTROLLERS.get("acc").__name__ == "Acc"
    monkeypatch.setenv(NO_PLUGINS_ENV, "0")
    assert CONTROLLERS.get("controllers.acc:Acc").__name__ == "Acc"
