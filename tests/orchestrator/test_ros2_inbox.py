"""The ROS 2 bridge's parameters and its command inbox, without a ROS graph: what lock-step takes and drops, the
timeout's message, and parameter errors at their scenario lines."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest

from federates.ros2.federate import Ros2Bridge
from federates.ros2.inbox import CommandInbox, LockstepTimeoutError
from orchestrator.scenario import parse_scenario
from orchestrator.scenario.errors import ScenarioError
from tests.waiting import wait_until

BASE = (Path(__file__).resolve().parents[2] / "scenarios" / "platoon.yaml").read_text()
TOPICS = {1: "/robot0/cmd_vel", 2: "/robot1/cmd_vel"}


def test_lockstep_takes_only_the_open_periods_first_answer():
    inbox = CommandInbox(lockstep=True)
    inbox.offer(1, 0, 1.0, 0.0)  # before any period is open: stale
    inbox.open_period(50_000_000)
    inbox.offer(1, 0, 2.0, 0.0)  # an earlier period
    inbox.offer(1, 100_000_000, 3.0, 0.0)  # a period not published yet
    inbox.offer(1, None, 4.0, 0.0)  # no stamp
    inbox.offer(1, 50_000_000, math.nan, 0.0)
    inbox.offer(1, 50_000_000, 1.0, 1e300)
    inbox.offer(1, 50_000_000, 1.5, 0.25)
    inbox.offer(1, 50_000_000, 9.0, 0.0)  # a second answer: the first counts
    inbox.offer(2, 50_000_000, 0.5, -0.1)
    got = inbox.wait_period([1, 2], 1.0, TOPICS)
    assert (got[1].speed, got[1].yaw_rate, got[2].speed, got[2].yaw_rate) == (1.5, 0.25, 0.5, -0.1)
    assert inbox.malformed == {"stale_stamp": 2, "future_stamp": 1, "no_stamp": 1, "not_finite": 1, "out_of_range": 1,
                               "duplicate": 1}
    assert inbox.received == 2 and inbox.waits == 0


def test_lockstep_waits_for_a_late_answer_from_another_thread():
    inbox = CommandInbox(lockstep=True)
    inbox.open_period(0)
    # the answer comes once the period waits for it (an event, not a delay); the wait ends with it, well before
    # its timeout (which would raise)
    answer = threading.Thread(target=lambda: (wait_until(lambda: inbox.waits == 1, "the period to wait"),
                                              inbox.offer(2, 0, 1.25, 0.0)))
    answer.start()
    assert inbox.wait_period([2], 60.0, TOPICS)[2].speed == 1.25
    answer.join()
    assert inbox.waits == 1 and len(inbox.round_trips_s) == 1


def test_lockstep_timeout_names_the_silent_topics_and_the_stamp():
    inbox = CommandInbox(lockstep=True)
    inbox.open_period(1_250_000_000)
    inbox.offer(1, 1_250_000_000, 1.0, 0.0)
    with pytest.raises(LockstepTimeoutError, match=r"header\.stamp = 1\.250000000 s on /robot1/cmd_vel within "
                                                   r"lockstep_timeout_s = 0\.05 s"):
        inbox.wait_period([1, 2], 0.05, TOPICS)


def test_free_mode_takes_the_newest_command_per_robot():
    inbox = CommandInbox(lockstep=False)
    inbox.offer(1, None, 1.0, 0.0)
    inbox.offer(1, None, 2.0, 0.1)
    inbox.offer(2, 123, 0.5, 0.0)  # a stamp means nothing here
    got = inbox.take_free()
    assert {r: (c.speed, c.yaw_rate) for r, c in got.items()} == {1: (2.0, 0.1), 2: (0.5, 0.0)}
    assert inbox.superseded == 1 and inbox.take_free() == {}


@pytest.mark.parametrize(("params", "expected"), [
    ("{mode: lockstep, stamped: false}", "federates[0].params.stamped: mode lockstep needs stamped cmd_vel"),
    ("{mode: sync}", "federates[0].params.mode: Input should be 'free' or 'lockstep', got 'sync'"),
    ("{perod_s: 0.1}", "federates[0].params.perod_s: unknown field 'perod_s' (did you mean 'period_s'?)"),
    ("{topics: [odom, lidar]}", "federates[0].params.topics[1]: Input should be 'odom', 'ground_truth', 'range', "
                                "'cam' or 'markers', got 'lidar'"),
    ("{domain_id: 300}", "federates[0].params.domain_id: Input should be less than or equal to 232, got 300"),
    ("{node_name: 'my node'}", "federates[0].params.node_name: must be a ROS name"),
    ("{lockstep_timeout_s: 0}", "federates[0].params.lockstep_timeout_s: Input should be greater than 0, got 0"),
    ("{range_min_m: 60}", "federates[0].params.range_min_m: must be below range_max_m (50), got 60"),
])
def test_parameter_errors_name_the_field_at_its_line(params: str, expected: str):
    text = BASE + f"federates:\n  - {{name: ros, type: ros2, params: {params}}}\n"
    line = text.count("\n")
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, source="s.yaml")
    assert f"s.yaml:{line}: {expected}" in str(err.value)


def test_the_constructor_checks_its_keyword_arguments_too():
    with pytest.raises(ValueError, match=r"ros2 bridge: mode: Input should be 'free' or 'lockstep' \(got 'sync'\)"):
        Ros2Bridge("ros", mode="sync")
    assert Ros2Bridge("ros", mode="lockstep").params.cmd_stamped
    assert not Ros2Bridge("ros").params.cmd_stamped
