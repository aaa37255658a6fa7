"""Vehicle-vehicle collisions: oriented rectangles, separating-axis test, sweep-and-prune broad phase.

Each vehicle is the rectangle ``length_m x width_m`` around its heading, with the rear bumper ``rear_overhang_m``
behind the rear-axle reference point (so the centre is ``length/2 - rear_overhang`` ahead of it). The broad phase
sorts the bounding circles along the coordinate axis of larger spread and sweeps (Baraff's sort-and-sweep), so a
road-like layout of 1,000 vehicles costs about N log N; only candidate pairs get the exact separating-axis test
(Gottschalk et al., "OBBTree", SIGGRAPH 1996, in 2D: four axes).

``ContactMonitor`` turns this into events, step by step: a contact is new when the pair did not overlap at the
previous step, and a cheap screening skips the exact test while no two bodies can touch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from core.rowtable import RowTable
from core.timebase import seconds_to_ns

SCREEN_S = 0.1
"""Horizon of the collision screening [s] (see ``ContactMonitor.new_contacts``)."""
_SCREEN_SLACK = 1.5  # travel bound / (speed x time): covers side slip of the rear axle up to 1.1 v


@njit(cache=True)
def near_pairs(px: np.ndarray, py: np.ndarray, radius: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Pairs ``(i, j)``, ``i < j``, whose circles (centre ``p``, ``radius``) overlap; shape ``(k, 2)``.

    Sort-and-sweep along x or y (whichever spreads more): a pair can overlap only if its sort keys differ by at most
    ``radius_i + max(radius)``.
    """
    return _sweep(px, py, radius, False)


@njit(cache=True)
def _sweep(px: np.ndarray, py: np.ndarray, radius: np.ndarray, first_only: bool) -> np.ndarray:  # pragma: no cover
    # near_pairs' sort and sweep; with first_only it stops at the first overlap (a one-row list: the full list's
    # allocation costs more than the sweep when all the caller wants to know is whether there is one)
    n = px.shape[0]
    if n < 2:
        return np.empty((0, 2), dtype=np.int64)
    key = px if (px.max() - px.min()) >= (py.max() - py.min()) else py
    order = np.argsort(key)
    r_max = radius.max()
    cap = 1 if first_only else 4 * n + 16
    out = np.empty((cap, 2), dtype=np.int64)
    k = 0
    for ia in range(n):
        a = order[ia]
        reach = key[a] + radius[a] + r_max
        for ib in range(ia + 1, n):
            b = order[ib]
            if key[b] > reach:
                break
            dx = px[b] - px[a]
            dy = py[b] - py[a]
            rr = radius[a] + radius[b]
            if dx * dx + dy * dy <= rr * rr:
                if k == cap:
                    grown = np.empty((2 * cap, 2), dtype=np.int64)
                    grown[:k] = out[:k]
                    out = grown
                    cap *= 2
                out[k, 0] = min(a, b)
                out[k, 1] = max(a, b)
                k += 1
                if first_only:
                    return out[:k]
    return out[:k]


@njit(cache=True, inline="always")
def _separated_on(ax: float, ay: float, dx: float, dy: float, c1: float, s1: float, hl1: float, hw1: float,
                  c2: float, s2: float, hl2: float, hw2: float) -> bool:  # pragma: no cover - compiled
    """True if the projections of the two rectangles on axis ``(ax, ay)`` do not overlap."""
    r1 = hl1 * abs(c1 * ax + s1 * ay) + hw1 * abs(-s1 * ax + c1 * ay)
    r2 = hl2 * abs(c2 * ax + s2 * ay) + hw2 * abs(-s2 * ax + c2 * ay)
    return abs(dx * ax + dy * ay) > r1 + r2


@njit(cache=True)
def _narrow(pairs, cx, cy, c, s, hl, hw):  # pragma: no cover - compiled
    keep = np.zeros(pairs.shape[0], dtype=np.bool_)
    for k in range(pairs.shape[0]):
        i = pairs[k, 0]
        j = pairs[k, 1]
        dx = cx[j] - cx[i]
        dy = cy[j] - cy[i]
        sep = (
            _separated_on(c[i], s[i], dx, dy, c[i], s[i], hl[i], hw[i], c[j], s[j], hl[j], hw[j])
            or _separated_on(-s[i], c[i], dx, dy, c[i], s[i], hl[i], hw[i], c[j], s[j], hl[j], hw[j])
            or _separated_on(c[j], s[j], dx, dy, c[i], s[i], hl[i], hw[i], c[j], s[j], hl[j], hw[j])
            or _separated_on(-s[j], c[j], dx, dy, c[i], s[i], hl[i], hw[i], c[j], s[j], hl[j], hw[j])
        )
        keep[k] = not sep
    return pairs[keep]


def body_centres(
    x: np.ndarray, y: np.ndarray, yaw: np.ndarray, length_m: np.ndarray, rear_overhang_m: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Rectangle centres [m] from rear-axle poses."""
    off = 0.5 * np.asarray(length_m) - np.asarray(rear_overhang_m)
    return x + off * np.cos(yaw), y + off * np.sin(yaw)


def colliding_pairs(
    x: np.ndarray, y: np.ndarray, yaw: np.ndarray, length_m: np.ndarray | float, width_m: np.ndarray | float,
    rear_overhang_m: np.ndarray | float,
) -> np.ndarray:
    """Rows ``(i, j)``, ``i < j``, of vehicles whose rectangles overlap (touching counts), shape ``(k, 2)``,
    sorted. Poses are rear-axle ``x, y`` [m], ``yaw`` [rad]; sizes per vehicle or scalars [m]."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    n = x.shape[0]
    y = np.ascontiguousarray(y, dtype=np.float64)
    yaw = np.ascontiguousarray(yaw, dtype=np.float64)
    length = np.broadcast_to(np.asarray(length_m, dtype=np.float64), (n,))
    width = np.broadcast_to(np.asarray(width_m, dtype=np.float64), (n,))
    rear = np.broadcast_to(np.asarray(rear_overhang_m, dtype=np.float64), (n,))
    cx, cy = body_centres(x, y, yaw, length, rear)
    hl = np.ascontiguousarray(0.5 * length)
    hw = np.ascontiguousarray(0.5 * width)
    pairs = near_pairs(cx, cy, np.hypot(hl, hw))
    hit = _narrow(pairs, cx, cy, np.cos(yaw), np.sin(yaw), hl, hw)
    if hit.shape[0] > 1:
        hit = hit[np.lexsort((hit[:, 1], hit[:, 0]))]
    return hit


@njit(cache=True)
def _any_near(x, y, reach):  # pragma: no cover - compiled
    """Whether any two circles (rear axle, ``reach``) overlap: all pairs for a few robots, else sort and sweep."""
    n = x.shape[0]
    if n > 16:
        return _sweep(x, y, reach, True).shape[0] > 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = x[j] - x[i]
            dy = y[j] - y[i]
            rr = reach[i] + reach[j]
            if dx * dx + dy * dy <= rr * rr:
                return True
    return False


@njit(cache=True)
def _near_by_universe(x, y, reach, order, bounds):  # pragma: no cover - compiled
    """``_any_near`` of each universe's rows alone (``core.universes.universe_segments``)."""
    out = np.zeros(bounds.shape[0] - 1, dtype=np.bool_)
    for u in range(bounds.shape[0] - 1):
        rows = order[bounds[u]:bounds[u + 1]]
        out[u] = _any_near(x[rows], y[rows], reach[rows])
    return out


class ContactMonitor(RowTable):
    """New contacts between vehicle bodies at each step, per robot row (``add``/``remove`` like the sensors).

    Screening keeps this nearly free: each robot's body lies in a circle of radius ``reach`` around its rear axle,
    which can move at most ``slack (v + a_max T) T`` within ``T = SCREEN_S``. When no two circles enlarged by that
    bound overlap, no contact is possible before ``t + T`` and the steps until then skip the test; otherwise the
    exact test (oriented rectangles) runs every step. No contact is missed.
    """

    ROW_COLUMNS = ("length", "width", "rear", "_reach", "_accel_max")

    def __init__(self) -> None:
        # per robot: rows in spawn order (RowTable)
        self.length = np.empty(0)  # body length [m]
        self.width = np.empty(0)  # body width [m]
        self.rear = np.empty(0)  # rear overhang behind the rear axle [m]
        self._reach = np.empty(0)  # bounding radius around the rear axle [m]
        self._accel_max = np.empty(0)  # [m/s^2], bounds the travel within the screening horizon
        self._clear_until_ns = -1  # no two bodies can touch before this time: exact tests skipped
        self._contacts: set[tuple[int, int]] = set()  # id pairs overlapping at the last step

    def add(self, length_m: np.ndarray, width_m: np.ndarray, rear_overhang_m: np.ndarray,
            max_accel_mps2: Sequence[float] | np.ndarray) -> None:
        """Append robots with their body sizes [m] and largest acceleration [m/s^2]."""
        length = np.asarray(length_m, float)
        width = np.asarray(width_m, float)
        rear = np.asarray(rear_overhang_m, float)
        # every corner lies within this distance of the rear axle: disjoint circles mean disjoint bodies
        self.append_rows(length=length, width=width, rear=rear,
                         _reach=np.hypot(np.maximum(length - rear, rear), 0.5 * width),
                         _accel_max=np.asarray(max_accel_mps2, float))
        self._clear_until_ns = -1

    def remove(self, keep: np.ndarray, alive_ids: Sequence[int]) -> None:
        """Keep the rows where ``keep`` is true; contacts of robots not in ``alive_ids`` are forgotten."""
        self.keep_rows(keep)
        alive = set(alive_ids)
        self._contacts = {p for p in self._contacts if p[0] in alive and p[1] in alive}
        self._clear_until_ns = -1

    def new_contacts(self, t_ns: int, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray,
                     ids: np.ndarray, universes: tuple[np.ndarray, np.ndarray] | None = None
                     ) -> list[tuple[int, int]]:
        """Id pairs ``(a, b)``, ``a < b``, sorted, whose bodies overlap at ``t_ns`` but did not at the last call;
        poses are rear-axle ``x, y`` [m], ``yaw`` [rad], speeds ``v`` [m/s], rows as added. ``universes``:
        ``core.universes.universe_segments`` of the rows; bodies of different universes never touch."""
        if universes is not None:
            return self._new_contacts_by_universe(t_ns, x, y, yaw, v, ids, universes)
        if not self._contacts:
            if t_ns < self._clear_until_ns or len(x) < 2:
                return []
            travel = _SCREEN_SLACK * (np.abs(v) + self._accel_max * SCREEN_S) * SCREEN_S
            if not _any_near(x, y, self._reach + travel):
                self._clear_until_ns = t_ns + seconds_to_ns(SCREEN_S)
                return []
            if not _any_near(x, y, self._reach):
                return []
        hit = colliding_pairs(x, y, yaw, self.length, self.width, self.rear)
        now = {(int(ids[i]), int(ids[j])) for i, j in hit}
        new = sorted(now - self._contacts)
        self._contacts = now
        return new

    def _new_contacts_by_universe(self, t_ns: int, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray,
                                  ids: np.ndarray, universes: tuple[np.ndarray, np.ndarray]) -> list[tuple[int, int]]:
        """``new_contacts`` of each universe alone: the same screening, and the exact test on the universes where
        two bodies' circles overlap or that had a contact at the last call (the only ones where bodies can touch
        or stop touching)."""
        order, bounds = universes
        if not self._contacts:
            if t_ns < self._clear_until_ns:
                return []
            travel = _SCREEN_SLACK * (np.abs(v) + self._accel_max * SCREEN_S) * SCREEN_S
            if not _near_by_universe(x, y, self._reach + travel, order, bounds).any():
                self._clear_until_ns = t_ns + seconds_to_ns(SCREEN_S)
                return []
        check = _near_by_universe(x, y, self._reach, order, bounds)
        if self._contacts:
            touching = np.isin(ids[order], np.array(sorted({i for pair in self._contacts for i in pair}), np.int64))
            check |= np.add.reduceat(touching.astype(np.int64), bounds[:-1]) > 0
        now: set[tuple[int, int]] = set()
        for u in np.flatnonzero(check).tolist():
            rows = order[bounds[u]:bounds[u + 1]]
            hit = colliding_pairs(x[rows], y[rows], yaw[rows], self.length[rows], self.width[rows], self.rear[rows])
            now.update((int(ids[rows[i]]), int(ids[rows[j]])) for i, j in hit)
        new = sorted(now - self._contacts)
        self._contacts = now
        return new


class CollisionError(RuntimeError):
    """Two vehicle bodies overlap and the scenario asked to stop (``physics.stop_on_collision``)."""

    def __init__(self, first: str, second: str, t_ns: int) -> None:
        super().__init__(f"robots '{first}' and '{second}' collided at t = {t_ns / 1e9:.3f} s")
        self.robot = f"{first}/{second}"  # FederateError reports it as the robot
