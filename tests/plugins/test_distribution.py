"""A plug-in distribution built and installed at test time (``pip install --target``, no network), then used from
YAML by entry-point name and by ``package.module:Class`` path through the real ``coopsim`` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples" / "coopsim_examples"

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tw-plugins"
version = "0.0.1"

[project.entry-points."coopsim.controllers"]
tw_gap = "tw_plugins.law:TimeGap"

[project.entry-points."coopsim.channels"]
tw_lossy = "tw_plugins.channel:LossyBeacons"

[tool.setuptools]
packages = ["tw_plugins"]
"""

SCENARIO = """\
version: 1
name: distribution
seed: 11
duration_s: 6.0
vehicles: {{count: 3}}
leader: {{profile: constant, params: {{speed_mps: 1.0}}}}
controller:
  type: {law}
  time_gap_s: 0.8
  {gain}: 0.5
channel:
  type: {channel}
  loss: 0.1
  latency_s: 0.02
outputs: {{plots: false, report: true}}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway distribution (the example law and channel under another name, with entry points), installed
    into its own target directory."""
    import importlib.util

    import setuptools

    version = tuple(int(part) for part in setuptools.__version__.split(".")[:2])
    if version < (70, 1) and importlib.util.find_spec("wheel") is None:
        pytest.fail(f"setuptools {setuptools.__version__} builds wheels only with the 'wheel' package installed "
                    "(the test extras need wheel, or setuptools >= 70.1)")
    root = tmp_path_factory.mktemp("dist")
    package = root / "src" / "tw_plugins"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""Throwaway coopsim plug-ins."""\n')
    for module in ("law.py", "channel.py"):
        shutil.copy(EXAMPLES / module, package / module)
    (root / "src" / "pyproject.toml").write_text(PYPROJECT)
    target = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-build-isolation",
                    "--no-deps", "--target", str(target), str(root / "src")], check=True, cwd=root,
                   capture_output=True, text=True)
    assert (target / "tw_plugins" / "law.py").is_file()
    return target


def coopsim(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``coopsim`` command with the plug-ins' target directory on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    command = Path(sys.executable).parent / "coopsim"
    return subprocess.run([str(command), *args], env=env, capture_output=True, text=True, timeout=300, cwd=REPO)


@pytest.mark.slow
@pytest.mark.parametrize(("law", "channel"), [("tw_gap", "tw_lossy"),
                                              ("'tw_plugins.law:TimeGap'", "'tw_plugins.channel:LossyBeacons'")],
                         ids=["entry_points", "paths"])
def test_validate_and_run_a_platoon_with_the_plugin_law_and_channel(site: Path, tmp_path: Path, law: str,
                                                                    channel: str) -> None:
    path = tmp_path / "platoon.yaml"
    path.write_text(SCENARIO.format(law=law, channel=channel, gain="kp"))
    checked = coopsim(site, "validate", str(path))
    assert checked.returncode == 0, checked.stderr
    assert f"controller {law.strip(chr(39))}" in " ".join(checked.stdout.split())
    out = tmp_path / "run"
    ran = coopsim(site, "run", str(path), "--out", str(out), "--quiet")
    assert ran.returncode == 0, ran.stderr
    resolved = (out / "scenario.resolved.yaml").read_text()
    assert f"type: {law.strip(chr(39))}" in resolved and "kd: 1.0" in resolved  # the plug-in's defaults written out
    run_info = json.loads((out / "run.json").read_text())
    assert run_info["channel"] == channel.strip("'") and run_info["status"] == "ok"
    assert run_info["controllers"] == [law.strip("'")]
    report = (out / "report.html").read_text()
    assert channel.strip("'") in report and f"control {law.strip(chr(39))}" in report
    metrics = json.loads((out / "metrics.json").read_text())
    # the spacing error is measured against the plug-in law's own desired gap r + h v = 1.8 m at 1 m/s
    for name in ("robot1", "robot2"):
        follower = metrics["followers"][name]
        assert follower["spacing_error_rms_m"] < 0.15 and 1.0 < follower["min_gap_m"] < 1.8
        assert follower["latency_mean_s"] == pytest.approx(0.02)


def test_a_misspelt_plugin_parameter_is_reported_at_its_line(site: Path, tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(SCENARIO.format(law="tw_gap", channel="tw_lossy", gain="kpp").replace("loss: 0.1", "los: 0.1"))
    checked = coopsim(site, "validate", str(path))
    assert checked.returncode == 2
    assert (f"{path}:10: controller.kpp: unknown field 'kpp' (did you mean 'kp'?); allowed: kd, kp, standstill_m, "
            "time_gap_s") in checked.stderr
    assert f"{path}:13: channel.los: unknown field 'los' (did you mean 'loss'?)" in checked.stderr
    assert "Traceback" not in checked.stderr


def test_without_the_distribution_the_names_are_unknown(tmp_path: Path) -> None:
    path = tmp_path / "platoon.yaml"
    path.write_text(SCENARIO.format(law="tw_gap", channel="tw_lossy", gain="kp"))
    checked = coopsim(tmp_path, "validate", str(path))  # tmp_path: a PYTHONPATH without the plug-ins
    assert checked.returncode == 2
    assert f"{path}:8: controller.type: unknown controller 'tw_gap'" in checked.stderr
