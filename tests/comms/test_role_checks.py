"""The freshness, leader-consistency and maneuver-entitlement checks of the plausibility detector, fed by hand:
each honest message of the platooning roles passes (the requests ``controllers.maneuvers`` sends: a station
outside the platoon asks its leader to join, a follower its own leader to leave, the leader a follower to split,
a rear platoon's leader the front one's to merge), and each forged one fails. The runs that show each check on its
attack are tests/orchestrator/test_misbehaviour.py's."""

from __future__ import annotations

import numpy as np
import pytest

from comms_models.misbehaviour import checks as ck
from comms_models.misbehaviour.plausibility import PlausibilityDetector, PlausibilityParams
from core.ports import MANEUVER_STATES

NAN = float("nan")
JOIN, LEAVE, SPLIT, MERGE = (MANEUVER_STATES.index(f"{m}_request") for m in ("join", "leave", "split", "merge"))
# platoon 7: 1 leads, 2 and 3 follow; platoon 8: 11 leads, 12 follows; 21 drives alone (platoon 9)
ROLES = {1: (NAN, NAN, 7, 0), 2: (1, 1, 7, 1), 3: (2, 1, 7, 2), 11: (NAN, NAN, 8, 0), 12: (11, 11, 8, 1),
         21: (NAN, NAN, 9, 0)}  # id -> predecessor, leader, platoon id, index
T_NS = 10_000_000_000


def own() -> dict[str, np.ndarray]:
    ids = sorted(ROLES)
    cols = {"id": np.array(ids, np.int64), "x": -10.0 * np.arange(len(ids)), "y": np.zeros(len(ids)),
            "yaw": np.zeros(len(ids))}
    for k, name in enumerate(("predecessor", "leader", "platoon_id", "platoon_index")):
        cols[name] = np.array([ROLES[i][k] for i in ids], np.float64)
    return cols


def pm(sender: int, receiver: int, maneuver: int = 0, peer: float = NAN, claim: int | None = None,
       index: float | None = None, gn: tuple[float, float] = (NAN, NAN)) -> dict[str, float]:
    """A platooning message as delivered; its platoon and index those of the sender's role unless given."""
    role = ROLES.get(sender, (NAN, NAN, NAN, NAN))
    return {"receiver": receiver, "sender": sender, "generated_ns": T_NS - 1_000, "received_ns": T_NS, "x": NAN,
            "y": NAN, "yaw": NAN, "v": NAN, "a": NAN, "yaw_rate": NAN, "u_des": 0.0, "kind": 1,
            "platoon_id": role[2] if claim is None else claim, "platoon_index": role[3] if index is None else index,
            "maneuver": maneuver, "maneuver_peer": peer, "gn_x": gn[0], "gn_y": gn[1]}


def cam(sender: int, receiver: int, gen_ns: int, rcv_ns: int, x: float = 0.0, v: float = 20.0) -> dict[str, float]:
    return {"receiver": receiver, "sender": sender, "generated_ns": gen_ns, "received_ns": rcv_ns, "x": x, "y": 0.0,
            "yaw": 0.0, "v": v, "a": 0.0, "yaw_rate": 0.0, "u_des": NAN, "kind": 0, "platoon_id": NAN,
            "platoon_index": NAN, "maneuver": NAN, "maneuver_peer": NAN, "gn_x": x, "gn_y": 0.0}


def table(rows: list[dict[str, float]]) -> dict[str, np.ndarray]:
    ints = ("receiver", "sender", "generated_ns", "received_ns", "kind")
    return {k: np.array([r[k] for r in rows], np.int64 if k in ints else np.float64) for k in rows[0]}


def judge(rows: list[dict[str, float]], t_ns: int = T_NS, det: PlausibilityDetector | None = None,
          checks: tuple[str, ...] = ("freshness", "leader_consistency", "maneuver_entitlement")) -> np.ndarray:
    """The failed-check masks of ``rows`` judged at ``t_ns`` by a detector running ``checks`` only."""
    det = det or detector(checks)
    mask, verdict = det.judge(t_ns, table(rows), own(), None)
    np.testing.assert_array_equal(verdict, mask != 0)
    return mask


def detector(checks: tuple[str, ...] = ("freshness", "leader_consistency", "maneuver_entitlement")
             ) -> PlausibilityDetector:
    det = PlausibilityDetector(PlausibilityParams(checks=list(checks)), 0.09)
    det.spawn(np.array(sorted(ROLES)), np.zeros(len(ROLES), np.int64), np.full(len(ROLES), 3.5),
              np.full(len(ROLES), 1.0))
    return det


HONEST = {
    "the leader's message": pm(1, 3),
    "the leader splits the platoon at a follower": pm(1, 3, SPLIT, peer=3),
    "a follower asks its leader to leave": pm(2, 3, LEAVE, peer=1),
    "the leader, to a follower that splits off": pm(1, 2, SPLIT, peer=2),
    "a rear platoon's leader asks the front one's to merge": pm(11, 1, MERGE, peer=1),
    "... which its own followers hear": pm(11, 12, MERGE, peer=1),
    "a station alone asks a leader to join": pm(21, 1, JOIN, peer=1),
    "... which a follower of that platoon hears": pm(21, 3, JOIN, peer=1),
    "another platoon's leader": pm(11, 3),
    "a message without platoon fields (a run without maneuvers)": pm(2, 3, index=NAN, claim=NAN),
    "... which a follower ahead of the leaver hears": pm(3, 2, LEAVE, peer=1),
    "... and the leader it asks": pm(3, 1, LEAVE, peer=1),
}
FORGED = {  # message -> the check it fails
    "a split request from a follower": (pm(2, 3, SPLIT, peer=3), "maneuver_entitlement"),
    "... that claims no position (a run without maneuvers)": (pm(2, 3, SPLIT, peer=1, index=NAN, claim=NAN),
                                                              "maneuver_entitlement"),
    "a split at the leader": (pm(1, 3, SPLIT, peer=1), "maneuver_entitlement"),
    "... from a station outside the platoon": (pm(11, 3, SPLIT, peer=1, index=NAN, claim=NAN),
                                               "maneuver_entitlement"),
    "a member asks to join its own platoon": (pm(2, 3, JOIN, peer=1), "maneuver_entitlement"),
    "a leave request to another platoon's leader": (pm(2, 3, LEAVE, peer=11), "maneuver_entitlement"),
    "a leave request from the leader": (pm(1, 2, LEAVE, peer=11), "maneuver_entitlement"),
    # a follower knows its place, its predecessor and its leader: a leave to its leader from a station claiming
    # its place, or its predecessor's without being it, or another platoon, or none, comes from no member
    "a leave to the receiver's leader from an outsider in its predecessor's place": (
        pm(21, 3, LEAVE, peer=1, claim=7, index=1), "maneuver_entitlement"),
    "... in the receiver's own place": (pm(21, 3, LEAVE, peer=1, claim=7, index=2), "maneuver_entitlement"),
    "... from another platoon's follower": (pm(12, 3, LEAVE, peer=1), "maneuver_entitlement"),
    "... claiming no platoon": (pm(21, 3, LEAVE, peer=1, index=NAN, claim=NAN), "maneuver_entitlement"),
    "a merge request from a follower": (pm(2, 3, MERGE, peer=11), "maneuver_entitlement"),
    "a request to itself": (pm(21, 1, JOIN, peer=21), "maneuver_entitlement"),
    "a follower claims to lead the platoon": (pm(2, 3, index=0), "leader_consistency"),
    "... in a run without platoon ids": (pm(2, 3, index=0, claim=NAN), "leader_consistency"),
    "... to the leader itself": (pm(3, 1, index=0), "leader_consistency"),
}


@pytest.mark.parametrize("case", sorted(HONEST))
def test_an_honest_platooning_message_passes(case: str) -> None:
    assert judge([HONEST[case]])[0] == 0


@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_forged_platooning_message_fails_its_check(case: str) -> None:
    message, check = FORGED[case]
    assert judge([message])[0] == ck.bit(check)


def test_a_message_under_the_leaders_id_from_elsewhere_fails() -> None:
    """The leader's last CAM (generated 100 ms before at x = 0, 20 m/s) puts it at 2.0 m now; a platooning message
    under its id sent from within 5 m of there passes, one sent from 30 m behind (a follower speaking as the
    leader) fails; with no CAM of the leader heard yet there is nothing to compare."""
    gen = T_NS - 100_000_000
    for gn_x, fails in ((2.0, False), (6.9, False), (7.1, True), (-28.0, True)):
        det = detector()
        judge([cam(1, 3, gen, gen + 2_000_000)], gen + 10_000_000, det)
        assert judge([pm(1, 3, gn=(gn_x, 0.0))], T_NS, det)[0] == (ck.bit("leader_consistency") if fails else 0)
    assert judge([pm(1, 3, gn=(-28.0, 0.0))])[0] == 0


def test_freshness_bounds_the_age_and_the_order_of_a_senders_cams() -> None:
    """At reception a CAM at most ``max_age_s`` (0.5 s) old and not from the future passes; generation times that
    go back from one CAM of a sender to its next fail even when young."""
    ms = 1_000_000
    for age_ms, fails in ((2, False), (499, False), (501, True), (1000, True), (-20, True), (-5, False)):
        assert judge([cam(2, 3, T_NS - age_ms * ms, T_NS)])[0] == (ck.bit("freshness") if fails else 0), age_ms
    det = detector()
    assert judge([cam(2, 3, T_NS - 100 * ms, T_NS - 98 * ms)], T_NS - 90 * ms, det)[0] == 0
    assert judge([cam(2, 3, T_NS - 150 * ms, T_NS)], T_NS, det)[0] == ck.bit("freshness")  # 50 ms back
    assert judge([cam(2, 3, T_NS + 100 * ms, T_NS + 102 * ms)], T_NS + 110 * ms, det)[0] == 0
