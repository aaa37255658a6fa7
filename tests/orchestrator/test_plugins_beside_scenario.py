"""A ``package.module:Class`` plug-in beside its scenario file is found without PYTHONPATH: the scenario's folder
is searched for the plug-in path's top-level name, after sys.path and without adding the folder to it, and never
with ``--no-plugins``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.scenario import ScenarioError, load_scenario

REPO = Path(__file__).resolve().parents[2]

SCENARIO = """
version: 1
name: beside
seed: 1
duration_s: 0.5
step_s: 0.01
vehicles: {count: 3}
controller: {type: '%s', spacing_m: 0.5}
outputs: {plots: false, report: false}
"""

PLUGIN = '''
"""The PATH CACC under another name; leaves a mark beside itself when imported."""
from pathlib import Path

from controllers.path_cacc import PathCacc

Path(__file__).with_suffix(".imported").touch()


class BesideLaw(PathCacc):
    """A law that lives next to its scenario."""
'''

SHADOW = 'from pathlib import Path\nPath(__file__).with_suffix(".imported").touch()\n'


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A scenario, its law as a single module, a law package, and files named like installed modules."""
    (tmp_path / "beside_law.py").write_text(PLUGIN)
    package = tmp_path / "beside_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "laws.py").write_text(PLUGIN)
    for name in ("numpy", "yaml", "controllers"):  # never imported from here: sys.path has them
        (tmp_path / f"{name}.py").write_text(SHADOW)
    (tmp_path / "scenario.yaml").write_text(SCENARIO % "beside_law:BesideLaw")
    (tmp_path / "package.yaml").write_text(SCENARIO % "beside_pkg.laws:BesideLaw")
    (tmp_path / "missing.yaml").write_text(SCENARIO % "not_beside:Law")
    return tmp_path


def _coopsim(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COOPSIM_NO_PLUGINS")}
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


def _imported(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.imported"))


@pytest.mark.slow
def test_a_plugin_beside_the_scenario_validates_and_runs(folder: Path):
    done = _coopsim("validate", str(folder / "scenario.yaml"))
    assert done.returncode == 0, done.stderr
    assert "controller beside_law:BesideLaw (2 robots)" in " ".join(done.stdout.split())  # rich wraps lines
    done = _coopsim("run", str(folder / "package.yaml"), "--out", str(folder / "run"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert (folder / "run" / "metrics.json").is_file()
    # the plug-ins and nothing else of the folder: numpy, yaml and controllers came from sys.path
    assert _imported(folder) == ["beside_law.imported", "laws.imported"]


def test_no_plugins_imports_nothing_from_the_folder(folder: Path):
    done = _coopsim("--no-plugins", "validate", str(folder / "scenario.yaml"))
    assert done.returncode == 2
    assert "scenario.yaml:8: controller.type: unknown controller 'beside_law:BesideLaw'; plug-ins are off" in \
        done.stderr
    assert "Traceback" not in done.stderr
    assert _imported(folder) == []


def test_a_plugin_found_nowhere_says_where_it_was_looked_for(folder: Path):
    done = _coopsim("validate", str(folder / "missing.yaml"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (f"missing.yaml:8: controller.type: cannot import controller 'not_beside:Law': No module named "
            f"'not_beside' (looked on sys.path and in the scenario's folder {folder.resolve()})") in done.stderr


def test_the_folder_is_not_put_on_sys_path(folder: Path, monkeypatch: pytest.MonkeyPatch):
    before = list(sys.path)
    monkeypatch.delitem(sys.modules, "beside_pkg", raising=False)
    monkeypatch.delitem(sys.modules, "beside_pkg.laws", raising=False)
    try:
        scenario = load_scenario(folder / "package.yaml")
        assert scenario.controller.type == "beside_pkg.laws:BesideLaw"
        assert sys.path == before
        assert sys.modules["beside_pkg.laws"].__file__ == str(folder.resolve() / "beside_pkg" / "laws.py")
    finally:
        sys.modules.pop("beside_pkg.laws", None)
        sys.modules.pop("beside_pkg", None)
    with pytest.raises(ScenarioError, match="No module named 'beside_law'"):  # a scenario from text has no folder
        from orchestrator.scenario import parse_scenario

        parse_scenario(SCENARIO % "beside_law:BesideLaw")
