"""``coopsim validate`` on very large scenario files (issue 23, item 8): linear and bounded in time and in what an
error echoes.

Each case is a generated file of about 10 MB: a 100,000-robot vehicle list, a mapping of 500,000 entries where a
number or a parameter mapping goes, a 10,000,000-character name. Validation must end with exit 2, no traceback,
within max(5 s, 2 x the time libyaml's safe loader needs to read the same file: measured on a tenth of it in the
same test, just before and just after, and scaled by ten), so that a loaded machine slows the bound as much as the
work; no error line may quote more than 1 KB of a value.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.timing import best_times

from .test_bad_input_corpus import REPO, check_outcome, validate_in_process

PLATOON = (REPO / "scenarios" / "platoon.yaml").read_text()
MIB = 2**20
BOUND_FLOOR_S = 5.0
CALIBRATION_FACTOR = 2.0
ECHO_LIMIT = 1024


def _fleet_as_list(n: int) -> str:
    """The platoon scenario with its fleet written out as a list of ``n`` robots, the last one broken."""
    head, _, tail = PLATOON.partition("vehicles:\n")
    rest = tail[tail.index("\nplatoon:") + 1:]
    entries = [f"  - {{name: robot{i}, vehicle: {{preset: auna_rc_1to10, model: kinematic}}, "
               f"initial: {{v: 1.0, yaw: 0.0}}}}\n" for i in range(n - 1)]
    entries.append("  - {name: last, spawn_at_s: soon}\n")
    return head + "vehicles:\n" + "".join(entries) + rest


def _mapping(n: int, indent: int) -> str:
    pad = " " * indent
    return "".join(f"{pad}key_{i:07d}: {i}.5\n" for i in range(n))


CASES: dict[str, tuple[Callable[[int], str], str]] = {
    # what it builds from a size (1 for the 10 MB file), and what the error must name
    "100,000-robot list": (lambda k: _fleet_as_list(100_000 // k), "vehicles[99999].spawn_at_s"),
    "mapping for a number": (lambda k: PLATOON.replace("duration_s: 40.0", "duration_s:\n" + _mapping(500_000 // k, 2)),
                             "(500,000 entries)"),
    "mapping of unknown vehicle parameters": (
        lambda k: PLATOON.replace("    model: kinematic\n",
                                  "    model: kinematic\n    params:\n" + _mapping(450_000 // k, 6)),
        "more unknown vehicle parameters"),
    "mapping of unknown controller gains": (
        lambda k: PLATOON.replace("  type: ela_cacc\n", "  type: ela_cacc\n" + _mapping(500_000 // k, 2)),
        "more problems after this one, not listed"),
    "10,000,000-character name": (lambda k: PLATOON.replace("name: platoon", "name: " + "a" * (10_000_000 // k)),
                                  "(10,000,000 characters)"),
}
# libyaml reads a tenth of the file, and the bound scales its time by ten: its reading time is linear in the size,
# and a full read of 10 MB (up to 20 s) twice per case was most of this file's time
CALIBRATION_SHARE = 10


def _calibration_s(text: str) -> float:
    """How long this machine, now, needs to read ``text`` with PyYAML's fastest safe loader."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    start = time.perf_counter()
    yaml.load(text, Loader=loader)
    return time.perf_counter() - start


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_10_mb_file_is_validated_in_bounded_time_and_echoed_briefly(case: str, tmp_path: Path) -> None:
    build, expected = CASES[case]
    text = build(1)
    assert 9 * MIB <= len(text.encode()) <= 20 * MIB
    path = tmp_path / "large.yaml"
    path.write_text(text)
    sample = build(CALIBRATION_SHARE)
    before = _calibration_s(sample)
    start = time.perf_counter()
    code, out, err = validate_in_process(path, [])
    took = time.perf_counter() - start
    # calibrated on both sides of the validation, so that load that comes or goes during it moves the bound too
    bound = max(BOUND_FLOOR_S, CALIBRATION_FACTOR * CALIBRATION_SHARE * max(before, _calibration_s(sample)))
    assert check_outcome(str(path), code, out, err) == "bad input"
    assert expected in err, err[:2000]
    longest = max(len(line) for line in err.splitlines())
    assert longest <= ECHO_LIMIT, f"an error line of {longest:,} characters"
    assert took <= bound, f"validate took {took:.1f} s, bound {bound:.1f} s"


def test_a_file_past_the_size_bound_is_refused_at_once(tmp_path: Path) -> None:
    from orchestrator.scenario.loader import MAX_SCENARIO_BYTES

    path = tmp_path / "huge.yaml"
    with path.open("w") as file:
        file.write(PLATOON)
        line = "# " + "x" * 1000 + "\n"
        file.write(line * (MAX_SCENARIO_BYTES // len(line) + 1))
    code, out, err = validate_in_process(path, [])
    assert check_outcome(str(path), code, out, err) == "bad input"
    # at once: before reading it as YAML. Timed against libyaml reading the same file, in turns, so that load slows
    # both sides alike (tests/timing.py); a refusal after parsing would take longer than the parse alone.
    text = path.read_text()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    refuse_s, read_s = best_times(lambda: validate_in_process(path, []), lambda: yaml.load(text, Loader=loader),
                                  rounds=3)
    assert refuse_s < read_s / 2, (refuse_s, read_s)
    assert f"larger than {MAX_SCENARIO_BYTES // MIB} MiB" in err, err
