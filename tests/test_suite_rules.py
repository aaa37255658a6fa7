"""Rules for the tests themselves, read from their source: a test must pass on a loaded machine as on a quiet one.

- No ``time.sleep`` as a synchronisation: waiting for something to happen is polling it (a ``time.sleep`` in the
  body of a ``while`` loop, as ``tests/waiting.py`` does) or an event. A sleep anywhere else is named below with
  the reason it is safe (it is what the test does to the system, such as an outage's length, not a wait for it).
- No assertion comparing a wall-clock time with a literal: a clock reading (``time.monotonic``, ``perf_counter``,
  ``time.time``), a name computed from one, or a run's wall-time figures (``wall_time_s``, ``real_time_factor``,
  ``lateness_s``, ``disconnected_s``) on one side and a number on the other. Speed is checked as a ratio of two
  timings taken in turns in the same test (``tests/timing.py``) and hangs by deadlines (``pytest.mark.timeout``, a
  process's ``timeout=``). The few bounds that remain are named below with the reason they hold under any load.

Each allowance is keyed by file and function; one that no longer matches anything fails too, so the list stays true.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}
WALL_KEYS = {"wall_time_s", "real_time_factor", "lateness_s", "disconnected_s"}

# (file, function): why this sleep is safe
SLEEPS_ALLOWED = {
    ("orchestrator/test_host_security.py", "test_idle_streams_are_dropped_and_a_new_client_then_gets_a_session"):
        "the client's pace (gaps a quarter of the idle timeout), the behaviour under test, not a wait",
    ("orchestrator/test_mqtt_bridge.py", "kill_and_restart"):
        "the broker outage's length: what the test does to the run",
    ("orchestrator/test_can_walkthrough.py", "test_the_walkthrough_ecu_waits_for_a_run_that_starts_late"):
        "the run starts late on purpose: the ECU must wait however long that is",
    ("orchestrator/test_interrupts.py", "_interrupt"):
        "the random point of the interruption, after the run has begun (polled before)",
    ("orchestrator/pacing_plugins.py", "step"): "a federate that takes wall time: the load under test",
    ("orchestrator/flaky_plugins.py", "step"): "a federate that takes wall time: the load under test",
    ("orchestrator/plugins.py", "step"): "the probe's stall: the fault under test",
    ("orchestrator/fault_plugins.py", "wrong"): "a call that never returns: the fault under test",
    ("orchestrator/hostile_plugins.py", "_fork_holder"): "a forked helper that outlives the run: the fault under test",
    ("orchestrator/can_fuzzer.py", "main"): "the fuzzer's sending pace (about 2,000 frames/s)",
    ("conformance/ros2_double.py", "spin_once"): "the rclpy double waits out its timeout as rclpy does; callers poll",
    ("test_docker.py", "wait_healthy"): "polling the health check at the interval the compose file gives",
    ("test_docker.py", "test_a_killed_federate_container_is_named_in_composes_output"):
        "the paced run goes on a while before a container is killed (its start polled before)",
    ("orchestrator/test_mqtt_bridge.py", "test_lockstep_rides_out_a_broker_restart_and_stays_bit_identical"):
        "the broker outage's length: what the test does to the run",
}

# (file, function): why this wall-clock bound holds under any load
BOUNDS_ALLOWED = {
    ("orchestrator/test_realtime.py", "test_a_paced_run_never_runs_ahead_of_the_wall_clock"):
        "lower bounds (load only lengthens a run) and lateness within the run's own wall time",
    ("orchestrator/test_realtime.py", "test_a_run_that_cannot_keep_up_warns_and_notes_it"):
        "a lower bound: a federate busy three times its period is late by more, and load only adds to it",
    ("orchestrator/test_mqtt_bridge.py", "test_the_right_password_from_the_environment_logs_in_and_a_wrong_one_is_a_"
                                         "clear_error"):
        "half the 120 s connect timeout the refusal must not wait out: a deadline, not a speed",
}
# Bounds against a timing taken in the same test are not literals and pass the rule as they are: the idle timeout's
# lower bound (test_host_security.py), the outage the test timed (test_mqtt_bridge.py), the calibrations of
# test_large_inputs.py, test_bad_input_corpus.py and test_live_view.py, and the ratios of tests/timing.py.


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(TESTS.rglob("*.py")):
        if "node_modules" in path.parts:
            continue
        yield path.relative_to(TESTS).as_posix(), ast.parse(path.read_text(), str(path))


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``function`` outside the functions nested in it (those are checked on their own)."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _is_sleep(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sleep"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "time")


def _polling_sleeps(function: ast.AST) -> set[int]:
    """``time.sleep`` calls inside a ``while`` loop (its retries included): polling steps."""
    found = set()
    for node in _own_nodes(function):
        if isinstance(node, ast.While):
            found |= {id(sub) for sub in _own_nodes(node) if _is_sleep(sub)}
    return found


def _reads_clock(node: ast.AST, tainted: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            if name in CLOCKS and owner in ("time", ""):
                return True
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return True
        if isinstance(sub, ast.Constant) and sub.value in WALL_KEYS:
            return True
    return False


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _is_number(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_number(node.left) and _is_number(node.right)
    return False


def _wall_bounds(function: ast.AST) -> list[int]:
    """Lines of asserts that compare a clock-derived value with a literal number."""
    tainted: set[str] = set()
    nodes = sorted(_own_nodes(function), key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    for _ in range(3):  # names computed from names computed from a clock
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if _reads_clock(node.value, tainted):
                    for target in targets:
                        tainted |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    lines = []
    for node in nodes:
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            operands = [compare.left, *compare.comparators]
            if any(_reads_clock(o, tainted) for o in operands) and any(_is_number(o) for o in operands):
                lines.append(node.lineno)
                break
    return lines


def _findings() -> tuple[dict[tuple[str, str], list[int]], dict[tuple[str, str], list[int]]]:
    sleeps: dict[tuple[str, str], list[int]] = {}
    bounds: dict[tuple[str, str], list[int]] = {}
    for name, tree in _sources():
        for function in _functions(tree):
            polling = _polling_sleeps(function)
            for node in _own_nodes(function):
                if _is_sleep(node) and id(node) not in polling:
                    sleeps.setdefault((name, function.name), []).append(node.lineno)
            lines = _wall_bounds(function)
            if lines:
                bounds.setdefault((name, function.name), []).extend(lines)
    return sleeps, bounds


def test_no_sleep_synchronises_a_test():
    sleeps, _ = _findings()
    unexplained = {f"{file}:{lines} in {function}" for (file, function), lines in sleeps.items()
                   if (file, function) not in SLEEPS_ALLOWED}
    assert not unexplained, ("time.sleep outside a polling loop: wait for the event (tests/waiting.py) instead, or "
                             f"name the case in SLEEPS_ALLOWED with why it is safe: {sorted(unexplained)}")
    stale = set(SLEEPS_ALLOWED) - set(sleeps)
    assert not stale, f"allowances that match no sleep any more (remove them): {sorted(stale)}"


def test_no_assert_bounds_wall_time_by_a_literal():
    _, bounds = _findings()
    unexplained = {f"{file}:{lines} in {function}" for (file, function), lines in bounds.items()
                   if (file, function) not in BOUNDS_ALLOWED}
    assert not unexplained, ("a wall-clock time compared with a literal: compare two timings taken in the same test "
                             "(tests/timing.py), use a deadline (pytest.mark.timeout) or an event, or name the case "
                             f"in BOUNDS_ALLOWED with why it holds under load: {sorted(unexplained)}")
    stale = set(BOUNDS_ALLOWED) - set(bounds)
    assert not stale, f"allowances that match no bound any more (remove them): {sorted(stale)}"


def test_the_rules_catch_what_they_are_about():
    """The scanner itself: each rule finds a planted case and passes its fixed form."""
    planted = ast.parse(
        "def synchronised():\n    start()\n    time.sleep(0.3)\n    check()\n"
        "def polled():\n    while not ready():\n        time.sleep(0.05)\n"
        "def bounded():\n    t0 = time.perf_counter()\n    work()\n    took = time.perf_counter() - t0\n"
        "    assert took < 0.9\n"
        "def direct():\n    start = time.monotonic()\n    assert time.monotonic() - start < 2.0\n"
        "def rtf(result):\n    assert result.run_info['real_time_factor'] > 3\n"
        "def ratio():\n    few, many = best_times(a, b)\n    assert many < 20 * few\n")
    functions = {f.name: f for f in _functions(planted)}
    sleeps = {name for name, f in functions.items()
              if any(_is_sleep(n) and id(n) not in _polling_sleeps(f) for n in _own_nodes(f))}
    assert sleeps == {"synchronised"}
    bounded = {name for name, f in functions.items() if _wall_bounds(f)}
    assert bounded == {"bounded", "direct", "rtf"}
