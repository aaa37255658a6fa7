"""What becomes of a scripted lane change (``federates/sumo/scripted.py``), against a stand-in for SUMO's vehicle
domain whose lane and lateral offset the test sets step by step: every way a request can end, its events and the
lines for ``run.json``. The real SUMO cases are in ``test_sumo_highway_cut_in.py``."""

from __future__ import annotations

from dataclasses import dataclass, field

from federates.sumo.params import LaneChange
from federates.sumo.scripted import LaneChangeScript

S = 1_000_000_000  # ns per s
P = S // 10  # SUMO's step


@dataclass
class FakeVehicles:
    """The calls the script makes on ``sumo.vehicle``, with the state the test sets."""

    lane: dict[str, int] = field(default_factory=dict)
    lateral: dict[str, float] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    told: list[tuple[str, int, float]] = field(default_factory=list)
    why: tuple[str, ...] = ("right", "TraCI", "urgent", "blocked by right follower")

    def getIDList(self) -> list[str]:  # noqa: N802 - SUMO's names
        return list(self.lane)

    def getRoadID(self, vid: str) -> str:  # noqa: N802
        return "motorway"

    def getLaneIndex(self, vid: str) -> int:  # noqa: N802
        return self.lane[vid]

    def getLateralLanePosition(self, vid: str) -> float:  # noqa: N802
        return self.lateral[vid]

    def setLaneChangeMode(self, vid: str, mode: int) -> None:  # noqa: N802
        self.modes[vid] = mode

    def changeLane(self, vid: str, lane: int, duration: float) -> None:  # noqa: N802
        self.told.append((vid, lane, duration))

    def getLaneChangeStatePretty(self, vid: str, direction: int) -> tuple[list[str], list[str]]:  # noqa: N802
        return [], list(self.why)


class FakeEdges:
    def getLaneNumber(self, edge: str) -> int:  # noqa: N802
        return 4


class FakeSumo:
    def __init__(self, **lanes: int) -> None:
        self.vehicle = FakeVehicles(lane=dict(lanes), lateral={vid: 0.0 for vid in lanes})
        self.edge = FakeEdges()


def kinds(events) -> list[tuple[str, int, str]]:
    return [(e.event, e.t_ns, e.vehicle) for e in events]


def test_a_change_made_at_once_is_requested_and_done_and_sets_the_mode():
    sumo = FakeSumo(cutter=2)
    script = LaneChangeScript([LaneChange(vehicle="cutter", t_s=1.0, lane=1, duration_s=5.0, mode=1024)])
    assert script.issue(sumo, S - P) == []  # not due yet
    told = script.issue(sumo, S)
    assert kinds(told) == [("lane_change_requested", S, "cutter")]
    assert (told[0].lane_from, told[0].lane_to) == (2, 1)
    assert sumo.vehicle.modes == {"cutter": 1024} and sumo.vehicle.told == [("cutter", 1, 5.0)]
    sumo.vehicle.lane["cutter"] = 1
    assert kinds(script.watch(sumo, S + P)) == [("lane_change_done", S + P, "cutter")]
    assert script.unmet == [] and script.watch(sumo, S + 2 * P) == []


def test_a_sublane_move_that_keeps_moving_is_not_delayed():
    sumo = FakeSumo(cutter=2)
    script = LaneChangeScript([LaneChange(vehicle="cutter", t_s=0.0, lane=1)])
    script.issue(sumo, 0)
    for k, lateral in enumerate((-0.01, -0.3, -1.2), start=1):  # towards the right: lane 1
        sumo.vehicle.lateral["cutter"] = lateral
        assert script.watch(sumo, k * P) == []
    sumo.vehicle.lane["cutter"], sumo.vehicle.lateral["cutter"] = 1, 1.5  # the centre crossed into lane 1
    assert kinds(script.watch(sumo, 4 * P)) == [("lane_change_done", 4 * P, "cutter")]
    assert script.unmet == []


def test_a_change_held_back_then_made_is_delayed_once_and_noted():
    sumo = FakeSumo(cutter=2)
    script = LaneChangeScript([LaneChange(vehicle="cutter", t_s=5.0, lane=1, duration_s=5.0)])
    script.issue(sumo, 5 * S)
    delayed = script.watch(sumo, 5 * S + P)
    assert kinds(delayed) == [("lane_change_delayed", 5 * S + P, "cutter")]
    assert delayed[0].detail == "blocked by right follower"  # SUMO's words, without the motives
    assert script.watch(sumo, 5 * S + 2 * P) == []  # once per request
    assert script.unmet == ["lane_changes[0] at 5.0 s: SUMO held back 'cutter' (lane 2 to 1) from 5.1 s: blocked by "
                            "right follower; not on lane 1 when the run ended"]
    sumo.vehicle.lane["cutter"] = 1
    done = script.watch(sumo, 7 * S)
    assert kinds(done) == [("lane_change_done", 7 * S, "cutter")]
    assert done[0].detail == "2.0 s after the request (held back from 5.1 s: blocked by right follower)"
    assert script.unmet == ["lane_changes[0] at 5.0 s: SUMO held back 'cutter' (lane 2 to 1) from 5.1 s: blocked by "
                            "right follower; it reached lane 1 at 7.0 s"]


def test_a_change_not_made_when_the_request_ends_is_refused():
    sumo = FakeSumo(cutter=2)
    script = LaneChangeScript([LaneChange(vehicle="cutter", t_s=1.0, lane=1, duration_s=0.5)])
    script.issue(sumo, S)
    for k in range(1, 5):
        script.watch(sumo, S + k * P)
    refused = script.watch(sumo, S + 5 * P)
    assert kinds(refused) == [("lane_change_refused", S + 5 * P, "cutter")]
    assert refused[0].detail == "still on lane 2 when the request ended (blocked by right follower)"
    assert script.unmet == ["lane_changes[0] at 1.0 s: SUMO did not move 'cutter' from lane 2 to lane 1: still on "
                            "lane 2 when the request ended (blocked by right follower)"]


def test_a_vehicle_that_leaves_or_is_told_again_ends_its_request_refused():
    sumo = FakeSumo(a=0, b=1)
    script = LaneChangeScript([LaneChange(vehicle="a", t_s=1.0, lane=1), LaneChange(vehicle="b", t_s=1.0, lane=2),
                               LaneChange(vehicle="b", t_s=2.0, lane=0)])
    script.issue(sumo, S)
    sumo.vehicle.lateral["b"] = 0.2  # b moves left, towards lane 2
    del sumo.vehicle.lane["a"]  # a drove off the network
    gone = script.watch(sumo, S + P)
    assert [(e.event, e.vehicle, e.detail) for e in gone] == [
        ("lane_change_refused", "a", "the vehicle left the network")]
    again = script.issue(sumo, 2 * S)
    assert [(e.event, e.vehicle, e.lane_to, e.detail) for e in again] == [
        ("lane_change_refused", "b", 2, "replaced by lane_changes[2] at 2.0 s"),
        ("lane_change_requested", "b", 0, "")]
    assert len(script.unmet) == 2
