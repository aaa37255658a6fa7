"""A finished run is read back from its directory whether or not its plug-ins are importable here: ``coopsim
metrics`` and ``coopsim mcap`` need none of them, say which they could not have and what they used instead, and
``--no-plugins`` imports nothing the run directory names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"
LAW = "coopsim_examples.law:TimeGap"


def _coopsim(*args: str, plugins_on_path: bool = False, code: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COOPSIM_NO_PLUGINS")}
    if plugins_on_path:
        env["PYTHONPATH"] = str(EXAMPLES)
    argv = ["-c", code, *args] if code is not None else ["-m", "orchestrator.cli", *args]
    return subprocess.run([sys.executable, *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The four example plug-ins (law, channel, vehicle model, federate) in a 3 s run, made where they import."""
    text = (EXAMPLES / "platoon_examples.yaml").read_text(encoding="utf-8").replace("duration_s: 20.0",
                                                                                  "duration_s: 3.0")
    scenario = tmp_path_factory.mktemp("scenario") / "examples.yaml"
    scenario.write_text(text, encoding="utf-8")
    out = tmp_path_factory.mktemp("run") / "out"
    done = _coopsim("run", str(scenario), "--out", str(out), "--quiet", plugins_on_path=True)
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "run.json").read_text())["status"] == "ok"
    return out


def _followers(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))["followers"]


def test_metrics_without_the_plugins_fall_back_to_the_recorded_desired_gap(plugin_run: Path, tmp_path: Path):
    original = _followers(plugin_run / "metrics.json")
    assert _coopsim(code="import coopsim_examples").returncode != 0  # not importable here
    done = _coopsim("metrics", str(plugin_run), "--no-report")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    law_note = next(n for n in notes if f"controller '{LAW}'" in n)
    assert "No module named 'coopsim_examples" in law_note and "desired_gap_m" in law_note
    assert "robot1, robot2" in law_note
    for kind in ("channel model", "vehicle model", "federate"):
        assert any(n.startswith(f"note: {kind} 'coopsim_examples.") for n in notes), (kind, notes)
    recomputed = _followers(plugin_run / "metrics.json")
    assert set(recomputed) == set(original) == {"robot1", "robot2"}
    for name, metrics in original.items():
        _same_but_spacing_errors(recomputed[name], metrics, name)


def _same_but_spacing_errors(got: object, want: object, where: str) -> None:
    """Equal, except spacing-error figures (at any depth: the stretches of following too), which come from the
    recorded desired gap rather than the law's and agree within 1 %."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), where
        for key, value in want.items():
            if "spacing_error" in key and isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=0.01, abs=1e-9), (where, key)
            else:  # everything else, the lateral deviation from the start poses included, is what the run said
                _same_but_spacing_errors(got[key], value, f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for k, (a, b) in enumerate(zip(got, want, strict=True)):
            _same_but_spacing_errors(a, b, f"{where}[{k}]")
    else:
        assert got == want, where


@pytest.mark.slow
def test_mcap_without_the_plugins_is_complete_and_says_so(plugin_run: Path, tmp_path: Path):
    done = _coopsim("mcap", str(plugin_run), "--out", str(tmp_path / "run.mcap"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "run.mcap").stat().st_size > 0
    assert f"controller '{LAW}'" in done.stderr and "complete without" in done.stderr
    with_plugins = _coopsim("mcap", str(plugin_run), "--out", str(tmp_path / "with.mcap"), plugins_on_path=True)
    assert with_plugins.returncode == 0 and "note:" not in with_plugins.stderr
    assert with_plugins.stdout.split(":", 1)[1] == done.stdout.split(":", 1)[1]  # the same messages on the topics


READ_WITHOUT_PLUGINS = """
import sys
from orchestrator.metrics import RunData
run = RunData.load(sys.argv[1])
assert not [m for m in sys.modules if m.startswith("coopsim_examples")], "a plug-in was imported"
assert run.laws == {}, run.laws
print("\\n".join(run.notes))
"""


def test_no_plugins_imports_nothing_the_run_directory_names(plugin_run: Path):
    env_code = "import os; os.environ['COOPSIM_NO_PLUGINS'] = '1'\n" + READ_WITHOUT_PLUGINS
    done = _coopsim(str(plugin_run), plugins_on_path=True, code=env_code)  # importable, yet not imported
    assert done.returncode == 0, done.stderr
    assert f"controller '{LAW}' is not available here (plug-ins are off" in done.stdout


def test_with_the_plugins_importable_the_law_is_used(plugin_run: Path):
    code = ("import sys\nfrom orchestrator.metrics import RunData\nrun = RunData.load(sys.argv[1])\n"
            "print(sorted(type(law).__name__ for law in run.laws.values()), run.notes)")
    done = _coopsim(str(plugin_run), plugins_on_path=True, code=code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['TimeGap', 'TimeGap'] []"
