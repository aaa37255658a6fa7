"""The plausibility checks of F2MD (Kamel et al., "Simulation framework for misbehavior detection in vehicular
networks", IEEE TVT 2020; VeReMi, van der Heijden et al. 2018), each a vectorised function of a message and the
previous one of its (receiver, sender) pair: True where the message fails the check. SI units throughout.

Each check is plain arithmetic on arrays or scalars (NaN compares False: no verdict), so that the detector's
compiled kernels (``kernels``) run the same functions per message."""

from __future__ import annotations

import numpy as np

from core.ports import MANEUVER_STATES

_JOIN, _LEAVE, _SPLIT, _MERGE = (MANEUVER_STATES.index(f"{m}_request") for m in ("join", "leave", "split", "merge"))

CHECKS = ("acceptance_range", "speed", "position_consistency", "speed_consistency", "position_speed",
          "beacon_frequency", "sudden_appearance", "sensor_overlap", "desired_accel", "kalman", "freshness",
          "leader_consistency", "maneuver_entitlement")
"""Check names; bit k of a verdict's mask is ``CHECKS[k]`` (``kalman``: the residual of ``kalman.KalmanTracks``;
new checks go at the end, so that a mask keeps its meaning)."""
DEFAULT_CHECKS = tuple(name for name in CHECKS if name != "kalman")
"""The plausibility detector's checks unless the scenario lists them (``kalman`` is asked for by name)."""


def bit(name: str) -> int:
    """The mask bit of check ``name``."""
    return 1 << CHECKS.index(name)


def acceptance_range(distance_m: np.ndarray, max_range_m: float) -> np.ndarray:
    """The claimed position lies farther from the receiver than a message can travel."""
    return distance_m > max_range_m


def speed(v: np.ndarray, max_speed_mps: float, max_reverse_mps: float) -> np.ndarray:
    """The claimed speed exceeds what a vehicle drives."""
    return (v > max_speed_mps) | (v < -max_reverse_mps)


def position_consistency(moved_m: np.ndarray, v_prev: np.ndarray, v: np.ndarray, dt: np.ndarray,
                         max_accel: float, tol_m: float) -> np.ndarray:
    """The sender moved farther between two messages than its claimed speeds and the largest acceleration allow."""
    bound = np.maximum(np.abs(v_prev), np.abs(v)) * dt + 0.5 * max_accel * dt**2 + tol_m
    return moved_m > bound


def speed_consistency(v_prev: np.ndarray, v: np.ndarray, dt: np.ndarray, max_accel: float,
                      tol_mps: float) -> np.ndarray:
    """The claimed speed changed faster than the largest acceleration allows."""
    return np.abs(v - v_prev) > max_accel * dt + tol_mps


def position_speed(moved_m: np.ndarray, v_prev: np.ndarray, v: np.ndarray, dt: np.ndarray, tol_m: float,
                   tol_mps: float) -> np.ndarray:
    """The distance moved between two messages disagrees with the mean of the claimed speeds (trapezoid rule)."""
    return np.abs(moved_m - 0.5 * (np.abs(v_prev) + np.abs(v)) * dt) > tol_m + tol_mps * dt


def beacon_frequency(dt: np.ndarray, min_interval_s: float) -> np.ndarray:
    """Two messages of one sender closer than the channel lets an honest station send them."""
    return dt < min_interval_s


def sudden_appearance(first: np.ndarray, listening_s: np.ndarray, distance_m: np.ndarray, warmup_s: float,
                      appearance_range_m: float) -> np.ndarray:
    """A sender heard for the first time close by, once the receiver has listened long enough to have heard it
    come (F2MD's sudden appearance, Kamel et al. 2020: a real station enters a receiver's radio range at its edge,
    hundreds of metres away, so its first message comes from far). ``listening_s``: how long the receiver has been
    able to hear this sender: since it started receiving, or, on a channel that delivers a receiver only the
    senders its applications read, since it began to read this one (before, the sender's messages never reached
    it: its first one is no appearance)."""
    return first & (listening_s > warmup_s) & (distance_m < appearance_range_m)


def sensor_overlap(expected_range_m: np.ndarray, measured_m: np.ndarray, tol_m: np.ndarray) -> np.ndarray:
    """The receiver's range sensor sees the sender at another distance than its message claims (NaN: no
    measurement of that sender, no verdict)."""
    return np.abs(expected_range_m - measured_m) > tol_m


def desired_accel(u_des: np.ndarray, a: np.ndarray, age_s: np.ndarray, max_accel: float, tol_mps2: float,
                  max_jerk_mps3: float) -> np.ndarray:
    """A platooning message's desired acceleration beyond any vehicle's, or farther from what the sender does than
    an honest vehicle's acceleration can be from its command. ``a``: the acceleration of the sender's newest CAM,
    measured ``age_s`` before the message's desired acceleration (NaN: unknown, no verdict on the difference).
    Its actuator follows the command with a first-order lag tau (``../shared/reference/controllers.md``; Ploeg et
    al.), so an honest sender's command leads its acceleration by tau x its jerk (``tol_mps2``), and over
    ``age_s`` the acceleration moves on by at most the largest jerk times ``age_s``: the slack grows with the age
    of the measurement (a CAM at 1 Hz at low speed says little about the acceleration a PM's command goes with;
    van der Heijden et al., VNC 2017, compare the falsified acceleration with what the sender really does)."""
    return (np.abs(u_des) > max_accel) | (np.abs(u_des - a) > tol_mps2 + max_jerk_mps3 * np.maximum(age_s, 0.0))


def freshness(age_s: np.ndarray, backwards: np.ndarray, max_age_s: float, max_future_s: float) -> np.ndarray:
    """A CAM generated longer before its reception than an honest channel delivers one, or after its reception,
    or before the previous CAM of its sender (its generation times go backwards). The delayed-message fault of the
    VeReMi extension (Kamel et al., ICC 2020) sends old content with its old time stamp; a receiver's relevance
    check of the generation time against its own clock (IEEE 1609.2's generation-time checks; a CAM's
    generationDeltaTime, EN 302 637-2) and the order of a sender's time stamps catch it."""
    return (age_s > max_age_s) | (age_s < -max_future_s) | backwards


def leader_claim(index: np.ndarray, sender: np.ndarray, known_leader: np.ndarray,
                 same_platoon: np.ndarray) -> np.ndarray:
    """A platooning message claims position 0 (the leader) of the receiver's platoon from another station than
    the leader the receiver knows (itself when it leads; -1: unknown, no verdict). A platoon has one leader, and
    its members know it from the platoon's management (join, ``../shared/reference/platooning.md``)."""
    return (index == 0) & same_platoon & (known_leader >= 0) & (sender != known_leader)


def leader_moved(distance_m: np.ndarray, age_s: np.ndarray, max_accel: float, tol_m: float) -> np.ndarray:
    """A platooning message under the leader's station id sent from farther from where the leader's last CAM puts
    it (moved on at its claimed speed and heading for ``age_s``) than the largest acceleration allows: someone else
    speaks as the leader (the frame's GeoNetworking position is where its radio is)."""
    return distance_m > tol_m + 0.5 * max_accel * age_s**2


def maneuver_entitlement(state: np.ndarray, index: np.ndarray, sender: np.ndarray, peer: np.ndarray,
                         member: np.ndarray, known_leader: np.ndarray, predecessor: np.ndarray,
                         own_index: np.ndarray, elsewhere: np.ndarray) -> np.ndarray:
    """A maneuver request its sender is not entitled to send for its role as the receiver knows it (``member``:
    the sender is in the receiver's platoon; ``index``: the position the message claims, NaN unknown). The roles
    of the platooning maneuvers (Segata et al.'s Plexe, ``../shared/reference/platooning.md``, and
    ``controllers.maneuvers``): a station outside a platoon asks its leader to join; a follower asks its own
    leader to leave; the leader asks a follower to split off; a platoon's leader asks another platoon's leader to
    merge. Amoozadeh et al. (IEEE Commun. Mag. 2015) list forged management messages among the attacks on
    platoons.

    A follower knows of its platoon only its own place (``own_index``), its predecessor and its leader, so a leave
    to its leader passes from any station that claims a place it cannot check; it fails from a station that
    claims the receiver's own place, or its predecessor's without being its predecessor (two vehicles in one
    place), or that claims another platoon or none (``elsewhere``: a station outside the receiver's platoon has
    nothing to leave)."""
    leads, follows = index == 0, index > 0
    not_leader = member & (sender != known_leader)
    join = (state == _JOIN) & member & (peer == known_leader)  # asks to join the platoon it is in
    leave = (state == _LEAVE) & (leads | (member & (peer != known_leader)))  # a leader, or not to its own leader
    impostor = (state == _LEAVE) & (known_leader >= 0) & (peer == known_leader) & (sender != predecessor) & (
        elsewhere | (index == own_index) | (index == own_index - 1))
    # only the leader splits, and at a follower: a split at the receiver's own leader is forged whoever sends it
    split = (state == _SPLIT) & (follows | not_leader | (peer == known_leader))
    merge = (state == _MERGE) & (follows | not_leader)  # only a leader merges its platoon
    request = (state == _JOIN) | (state == _LEAVE) | (state == _SPLIT) | (state == _MERGE)
    return join | leave | impostor | split | merge | (request & (peer == sender))
