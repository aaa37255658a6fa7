"""Hostile and corrupted YAML: every case ends quickly as a bad-input error naming the line and the field path."""

from __future__ import annotations

import contextlib
import io
import os
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from orchestrator.batch.grid import parse_param
from orchestrator.cli.main import main
from orchestrator.scenario import ScenarioError, load_scenario, parse_scenario
from orchestrator.scenario.yamlmarks import MAX_DEPTH, YamlInputError, decode_text, load_value, load_with_lines

REPO = Path(__file__).resolve().parents[2]
PLATOON = REPO / "scenarios" / "platoon.yaml"

from tests.orchestrator.test_scenario import BASE  # noqa: E402  (the smallest valid scenario, shared)
from tests.timing import best_times  # noqa: E402

BOMB = "\n".join(
    ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 8)]
) + "\n"
FLAT_100K = "a: [" + ", ".join(["1"] * 99_999) + "]\n"  # within the node limit: the calibration of the timed tests


def refused(text: str) -> YamlInputError:
    with pytest.raises(YamlInputError) as info:
        load_with_lines(text)
    return info.value


def problems(text: str, overrides: tuple[str, ...] = ()) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(textwrap.dedent(text), "s.yaml", overrides)
    return str(info.value)


def cli(*argv: str) -> tuple[object, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


# -- aliases -------------------------------------------------------------------------------------------------------
def test_an_alias_bomb_is_refused_in_bounded_time_and_memory():
    assert len(BOMB) < 500  # 9^8 = 43 million strings once expanded
    tracemalloc.start()
    try:
        error = refused(BOMB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # memory is the load-independent guard (expanded, the bomb is gigabytes)
    assert peak < 20e6, peak
    assert error.line == 6 and error.loc == ("l5", 0)  # the first alias that expands past the limit
    assert "alias '*l4' expands the document past 100000 nodes" in error.problem
    # time: refused early, for about what reading the 100,000 nodes it may expand to costs (expanded, minutes);
    # timed against that reading in turns, so that load slows both sides alike (tests/timing.py)
    bomb_s, flat_s = best_times(lambda: refused(BOMB), lambda: load_with_lines(FLAT_100K), rounds=3)
    assert bomb_s < 3 * flat_s, (bomb_s, flat_s)


def test_an_alias_bomb_in_a_scenario_file_is_exit_2_naming_its_line(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BASE + BOMB)
    code, _, err = cli("validate", str(path))
    assert code == 2
    assert err.splitlines()[1] == (f"{path}:14: l5[0]: alias '*l4' expands the document past 100000 nodes (nested "
                                   "aliases multiply)")


@pytest.mark.parametrize(("text", "line", "loc"), [
    ("a: &a [1, *a]\n", 1, ("a", 1)),
    ("a: &a {b: *a}\n", 1, ("a", "b")),
    ("x: 1\na: &a\n  - 2\n  - [*a]\n", 4, ("a", 1, 0)),
])
def test_an_alias_inside_its_own_anchor_is_refused(text, line, loc):
    error = refused(text)
    assert (error.line, error.loc) == (line, loc)
    assert "alias '*a' refers to a block that contains it" in error.problem


def test_many_alias_references_are_refused():
    error = refused("x: &x 1\nys: [" + ", ".join(["*x"] * 10_001) + "]\n")
    assert error.line == 2 and "more than 10000 alias references" in error.problem


def test_an_alias_that_nests_too_deep_is_refused():
    deep = "[" * 40 + "]" * 40
    error = refused(f"a: &a {deep}\nb: {'[' * 30}*a{']' * 30}\n")
    assert error.line == 2 and f"alias '*a' nests deeper than {MAX_DEPTH} levels" in error.problem


def test_aliases_within_the_limits_give_independent_copies():
    listed = "vehicles:\n  - {name: lead}\n  - {name: a, controller: &c {k1: 2.0}}\n  - {name: b, controller: *c}\n"
    text = BASE.replace("vehicles:\n  count: 3\n", listed)
    scenario = parse_scenario(text, "s.yaml", ["vehicles[1].controller.k1=3.0"])
    assert scenario.vehicles[1].controller == {"k1": 3.0} and scenario.vehicles[2].controller == {"k1": 2.0}


# -- nesting -------------------------------------------------------------------------------------------------------
def test_900_levels_of_flow_nesting_are_refused_at_their_line():
    error = refused("a: 1\nb: " + "[" * 900 + "]" * 900 + "\n")
    assert error.line == 2 and error.problem == f"nesting deeper than {MAX_DEPTH} levels"
    assert error.loc[:3] == ("b", 0, 0)


def test_900_levels_of_block_nesting_are_refused_at_their_line():
    text = "".join("  " * i + f"k{i}:\n" for i in range(900))
    error = refused(text)
    assert error.line == MAX_DEPTH and error.loc[:2] == ("k0", "k1")


def test_the_depth_limit_is_exact():
    assert load_value("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)) is not None  # the root mapping adds one
    assert refused("a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH).problem.startswith("nesting deeper")


def test_100000_levels_do_not_hang():
    deep = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"
    refused(deep)
    # refused at the depth limit, long before reading all: quicker than reading 100,000 flat nodes, timed in turns
    deep_s, flat_s = best_times(lambda: refused(deep), lambda: load_with_lines(FLAT_100K), rounds=3)
    assert deep_s < flat_s, (deep_s, flat_s)


# -- tags, keys, scalars -------------------------------------------------------------------------------------------
def test_python_tags_are_refused_and_never_run(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(os, "system", lambda command: calls.append(command) or 0)
    path = tmp_path / "evil.yaml"
    path.write_text(BASE + "description: !!python/object/apply:os.system ['touch pwned']\n")
    code, _, err = cli("validate", str(path))
    assert code == 2 and calls == []
    assert err.splitlines()[1] == (f"{path}:9: description: tag '!!python/object/apply:os.system' is not allowed on "
                                   "a list (allowed: !!seq)")


@pytest.mark.parametrize(("value", "shown"), [
    ("!!binary aGVsbG8=", "!!binary"), ("!!set {a, b}", "!!set"), ("!!omap [a: 1]", "!!omap"),
    ("!!timestamp 2024-01-01", "!!timestamp"), ("!foo 1", "!foo"), ("!!python/name:os.system ''", "!!python/name"),
])
def test_tags_outside_the_core_set_are_refused_at_their_line(value, shown):
    msg = problems(BASE + f"description: {value}\n")
    assert msg.startswith(f"s.yaml:9: description: tag '{shown}")
    assert "is not allowed" in msg


def test_core_tags_are_accepted():
    assert load_value("[!!str 1, !!float 2, !!int '3', !!bool true, !!null '']") == ["1", 2.0, 3, True, None]


@pytest.mark.parametrize(("value", "message"), [
    ("!!float abc", "'abc' is not a valid float"), ("!!int 1.5", "'1.5' is not a valid int"),
    ("!!bool maybe", "'maybe' is not a valid bool"), ("!!float", "'' is not a valid float"),
    ("9" * 5000, "is not a valid int"),
])
def test_scalars_that_do_not_convert_are_refused_at_their_line(value, message):
    msg = problems(BASE.replace("time_gap_s: 1.0", f"time_gap_s: {value}"))
    assert msg.startswith("s.yaml:8: controller.time_gap_s: ") and message in msg


def test_duplicate_keys_name_both_lines():
    msg = problems(BASE + "controller:\n  k1: 2\n")
    assert msg == "s.yaml:9: controller: duplicate key 'controller' at lines 6 and 9 (a mapping names each key once)"
    msg = problems(BASE.replace("  time_gap_s: 1.0\n", "  time_gap_s: 1.0\n  time_gap_s: 2.0\n"))
    assert msg.startswith("s.yaml:9: controller.time_gap_s: duplicate key 'time_gap_s' at lines 8 and 9")


@pytest.mark.parametrize("entry", ["? [a, b]\n: 1\n", "? {a: 1}\n: 2\n", "[a, b]: 1\n"])
def test_complex_keys_are_refused_at_their_line(entry):
    msg = problems(BASE + entry)
    assert msg.startswith("s.yaml:9: <scenario>: a mapping key must be a plain name")


def test_merge_keys_are_refused():
    msg = problems(BASE + "leader: &l {profile: s_curve}\nchannel:\n  <<: *l\n")
    assert msg.startswith("s.yaml:11: channel: merge keys ('<<') are not supported")


def test_dates_and_words_stay_strings():
    assert load_value("{name: 2024-01-01, mode: off, x: =}") == {"name": "2024-01-01", "mode": "off", "x": "="}


def test_numeric_keys_are_names():
    assert load_value("{1: a, 2.5: b}") == {"1": "a", "2.5": "b"}


# -- bytes ---------------------------------------------------------------------------------------------------------
def test_a_binary_file_is_exit_2_with_the_byte_offset(tmp_path):
    path = tmp_path / "image.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    code, _, err = cli("validate", str(path))
    assert code == 2
    assert err.splitlines()[1] == (f"{path}:1: <scenario>: not UTF-8 text: byte 0x89 at byte offset 0 (invalid "
                                   "start byte); a scenario is a UTF-8 YAML file")


@pytest.mark.parametrize("command", [["validate"], ["run", "--quiet"], ["compare", "--quiet"],
                                     ["sweep", "--quiet", "--param", "seed=1,2"]])
def test_every_command_refuses_a_non_utf8_file_with_exit_2(tmp_path, command):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(BASE.encode() + b"description: caf\xe9\n")
    code, _, err = cli(command[0], str(path), *command[1:], *(["--out", str(tmp_path / "out")]
                                                              if command[0] != "validate" else []))
    assert code == 2 and "Traceback" not in err
    assert err.splitlines()[1].startswith(f"{path}:9: <scenario>: not UTF-8 text")
    assert f"byte offset {len(BASE) + len('description: caf')} " in err
    assert not (tmp_path / "out").exists()


def test_a_utf8_bom_is_accepted_and_utf16_is_refused(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert load_scenario(path).name == "t"
    with pytest.raises(YamlInputError, match="the file is UTF-16"):
        decode_text("\ufeff".encode("utf-16-le") + BASE.encode("utf-16-le"))


def test_control_characters_are_refused_at_their_line():
    msg = problems(BASE + "description: a\x00b\n")
    offset = len(BASE) + len("description: a")
    assert msg == f"s.yaml:9: <scenario>: control character U+0000 at byte offset {offset}: not a text file"


def test_an_unreadable_file_is_bad_input(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read file"):
        load_scenario(tmp_path)


# -- the same loader for --set, --param and scenario.resolved.yaml --------------------------------------------------
@pytest.mark.parametrize(("item", "expected"), [
    ("controller.k1=[1", "controller.k1: the --set value is not valid YAML: while parsing a flow sequence"),
    ("controller={a: 1, a: 2}", "controller: the --set value is refused: duplicate key 'a' twice on line 1"),
    ("controller.k1=&a [*a]", "controller.k1: the --set value is refused: alias '*a' refers to a block"),
    ("controller.k1=!!python/object/apply:os.system [ls]", "tag '!!python/object/apply:os.system' is not allowed"),
    ("controller.k1=!!float abc", "controller.k1: the --set value is refused: 'abc' is not a valid float"),
])
def test_a_bad_set_value_is_bad_input_naming_the_override(item, expected):
    msg = problems(BASE, (item,))
    assert msg.startswith("s.yaml: ") and expected in msg and msg.endswith("(from --set)")


def test_a_bad_param_value_is_bad_input():
    with pytest.raises(ScenarioError) as info:
        parse_param("controller.k1=1,!!float abc")
    assert "controller.k1: --param: value '!!float abc' is not valid YAML: 'abc' is not a valid float" in str(
        info.value)
    code, _, err = cli("sweep", str(PLATOON), "--param", f"controller.k1={BOMB.splitlines()[1]}")
    assert code == 2 and "found undefined alias 'l0'" in err


def test_a_resolved_scenario_is_read_back_through_the_same_loader(tmp_path):
    from orchestrator.metrics.rundata import RunData

    text = PLATOON.read_text()
    (tmp_path / "scenario.resolved.yaml").write_text(text + "seed: 7\n")
    line = text.count("\n") + 1
    with pytest.raises(ScenarioError, match=rf"resolved.yaml:{line}: seed: duplicate key 'seed' at lines 6 and {line}"):
        RunData.load(tmp_path)


# -- finite times: the schema's physical sanity checks ---------------------------------------------------------------
@pytest.mark.parametrize("override", ["robot2: {spawn_at_s: .inf}", "robot2: {despawn_at_s: .inf}"])
def test_infinite_times_are_bad_input(tmp_path, override):
    path = tmp_path / "inf.yaml"
    path.write_text(BASE.replace("  count: 3\n", f"  count: 3\n  overrides:\n    {override}\n"))
    code, _, err = cli("validate", str(path))
    assert code == 2 and f"{path}:7: vehicles.overrides.robot2." in err
