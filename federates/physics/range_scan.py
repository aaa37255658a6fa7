"""Forward range sensor: the nearest in-path vehicle ahead of each robot, one compiled scan over all robots.

The compiled helpers (``path_offset``, ``in_path``) live here, next to the scan that inlines them: numba's on-disk
cache only notices edits to the file of the cached function itself.

``tests/physics/range_oracle.py`` holds a slow brute-force reference, written from the definition in
``RangeSensor``'s docstring rather than from this code; the tests compare the scan against it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numba import njit

from controllers.columns import LazyColumns
from core.rng import KeyedNormal
from core.rowtable import RowTable


@njit(cache=True)
def path_offset(fwd, left, curvature):  # pragma: no cover - compiled (scalars or arrays)
    """Signed distance [m] of the point (fwd, left), in the sensor's frame, from the circle of ``curvature``
    [1/m] tangent to the heading at the sensor (the predicted path), positive to the right of the path: with
    R = 1 / curvature and A = fwd^2 + (left - R)^2 it is sign(curvature) (sqrt(A) - |R|), written as
    curvature (A - R^2) / (|curvature| sqrt(A) + 1) so that it stays exact through curvature 0 (-left)."""
    num = curvature * (fwd * fwd + left * left) - 2.0 * left
    den = np.sqrt((curvature * fwd) ** 2 + (curvature * left - 1.0) ** 2) + 1.0
    return num / den


@njit(cache=True)
def in_path(offset, corridor, tracked, keep_factor):  # pragma: no cover - compiled
    """Whether a target ``offset`` [m] from the predicted path counts: within the corridor, or within
    ``keep_factor`` corridors for the target the sensor already tracks."""
    limit = corridor * keep_factor if tracked else corridor
    return abs(offset) <= limit


@njit(cache=True)
def _range_scan(x, y, yaw, v, front, rear, ids, max_range, half_fov, curvature, corridor, locked, keep
                ):  # pragma: no cover - compiled
    """Nearest target per robot (the test of ``RangeSensor``), with a per-sensor broad phase.

    Sensors sit ``front`` ahead of the rear axle, targets ``rear`` behind it. Targets are sorted along the axis of
    larger spread; each sensor only visits the targets whose key lies within the projection of its field of view (a
    wedge of radius ``max_range``), narrowed by the band around the predicted path that the corridor allows, on
    that axis, instead of every vehicle within ``max_range``: across side-by-side platoons that is a few
    candidates each. Returns range [m], range rate [m/s], bearing from the heading [rad, positive left], the
    target's row and its id (-1 and NaN when nothing is seen).
    """
    n = x.shape[0]
    rng_out = np.full(n, np.nan)
    rate_out = np.full(n, np.nan)
    bearing_out = np.full(n, np.nan)
    row_out = np.full(n, -1, dtype=np.int64)
    id_out = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return rng_out, rate_out, bearing_out, row_out, id_out
    c = np.cos(yaw)
    s = np.sin(yaw)
    sx = x + front * c
    sy = y + front * s
    tx = x - rear * c
    ty = y - rear * s
    along_x = (tx.max() - tx.min()) >= (ty.max() - ty.min())
    key = tx if along_x else ty
    order = np.argsort(key)
    sorted_key = key[order]
    rank = np.empty(n, dtype=np.int64)  # each robot's place in the sort: where its own window search starts
    for k in range(n):
        rank[order[k]] = k
    ch = np.cos(half_fov)
    sh = np.sin(half_fov)
    # ahead (fwd > 0), |atan2(left, fwd)| <= half_fov is |left| <= tan(half_fov) fwd; always true from pi/2 on
    tan_h = np.tan(half_fov) if half_fov < 0.5 * np.pi else np.inf
    r2 = max_range * max_range
    for i in range(n):
        # projections on the axis of the wedge's two edges, and whether the axis direction (or its opposite) lies
        # inside the wedge, give the wedge's extent along the axis
        if along_x:
            e1 = c[i] * ch - s[i] * sh
            e2 = c[i] * ch + s[i] * sh
            cos_axis = c[i]
            origin = sx[i]
        else:
            e1 = s[i] * ch + c[i] * sh
            e2 = s[i] * ch - c[i] * sh
            cos_axis = s[i]
            origin = sy[i]
        hi = (1.0 if cos_axis >= ch else max(0.0, e1, e2)) * max_range
        lo = (-1.0 if -cos_axis >= ch else min(0.0, e1, e2)) * max_range
        # the corridor bounds it too: an accepted target lies within keep * corridor of the predicted circle,
        # whose lateral offset at forward distance f <= max_range is at most min(|k| f^2, 2 / |k|)
        # (1 - sqrt(1 - u^2) <= u^2); so inside the box f in [0, max_range], |left| <= lateral
        k_abs = abs(curvature[i])
        lateral = keep * corridor[i] + min(k_abs * r2, 2.0 / k_abs if k_abs > 0.0 else np.inf)
        if lateral < max_range:
            sin_axis = s[i] if along_x else c[i]  # |axis . left direction|
            box_hi = max(0.0, cos_axis * max_range) + lateral * abs(sin_axis)
            box_lo = min(0.0, cos_axis * max_range) - lateral * abs(sin_axis)
            hi = min(hi, box_hi)
            lo = max(lo, box_lo)
        # the window [k0, k1) is what searchsorted (left, then right) gives, found by walking from the robot's
        # own rank: its sensor lies a body length from its key, so a few steps instead of a bisection of all keys
        key_lo = origin + lo - 1e-9
        key_hi = origin + hi + 1e-9
        k0 = rank[i]
        while k0 > 0 and sorted_key[k0 - 1] >= key_lo:
            k0 -= 1
        while k0 < n and sorted_key[k0] < key_lo:
            k0 += 1
        k1 = max(k0, rank[i])
        while k1 > k0 and sorted_key[k1 - 1] > key_hi:
            k1 -= 1
        while k1 < n and sorted_key[k1] <= key_hi:
            k1 += 1
        best = -1  # the nearest accepted target so far; rate and bearing are computed for the winner only
        best_d = 0.0
        best_dx = 0.0
        best_dy = 0.0
        best_fwd = 0.0
        best_left = 0.0
        for k in range(k0, k1):
            j = order[k]
            if j == i:
                continue
            dx = tx[j] - sx[i]
            dy = ty[j] - sy[i]
            fwd = c[i] * dx + s[i] * dy
            if fwd <= 0.0:
                continue
            d2 = dx * dx + dy * dy
            if d2 > r2:
                continue
            left = -s[i] * dx + c[i] * dy
            if abs(left) > tan_h * fwd:
                continue
            if not in_path(path_offset(fwd, left, curvature[i]), corridor[i], ids[j] == locked[i], keep):
                continue
            d = np.sqrt(d2)
            if best < 0 or d < best_d:
                best, best_d, best_dx, best_dy, best_fwd, best_left = j, d, dx, dy, fwd, left
        if best >= 0:
            j = best
            rng_out[i] = best_d
            rate_out[i] = (((v[j] * c[j] - v[i] * c[i]) * best_dx + (v[j] * s[j] - v[i] * s[i]) * best_dy)
                           / max(best_d, 1e-9))
            bearing_out[i] = np.arctan2(best_left, best_fwd)
            row_out[i] = j
            id_out[i] = ids[j]
    return rng_out, rate_out, bearing_out, row_out, id_out


@njit(cache=True)
def _range_scan_universes(x, y, yaw, v, front, rear, ids, max_range, half_fov, curvature, corridor, locked, keep,
                          order, bounds):  # pragma: no cover - compiled
    """``_range_scan`` run on each universe's rows alone (``core.universes.universe_segments``: ``order`` and
    ``bounds``), so a sensor only ever sees robots of its own universe and each universe's scan is the scan of a
    world holding it alone; target rows are in the caller's numbering."""
    n = x.shape[0]
    rng_out = np.full(n, np.nan)
    rate_out = np.full(n, np.nan)
    bearing_out = np.full(n, np.nan)
    row_out = np.full(n, -1, dtype=np.int64)
    id_out = np.full(n, -1, dtype=np.int64)
    for u in range(bounds.shape[0] - 1):
        rows = order[bounds[u]:bounds[u + 1]]
        r, rate, bearing, row, target = _range_scan(
            x[rows], y[rows], yaw[rows], v[rows], front[rows], rear[rows], ids[rows], max_range, half_fov,
            curvature[rows], corridor[rows], locked[rows], keep)
        for k in range(rows.shape[0]):
            i = rows[k]
            rng_out[i] = r[k]
            rate_out[i] = rate[k]
            bearing_out[i] = bearing[k]
            row_out[i] = rows[row[k]] if row[k] >= 0 else -1
            id_out[i] = target[k]
    return rng_out, rate_out, bearing_out, row_out, id_out


def path_curvature(yaw_rate: np.ndarray | None, v: np.ndarray, min_speed_mps: float = 0.1) -> np.ndarray:
    """Curvature of the predicted path, yaw rate / speed [1/m]; 0 (straight ahead) without a yaw rate or below
    ``min_speed_mps``, where the ratio means nothing."""
    v = np.asarray(v, dtype=float)
    if yaw_rate is None:
        return np.zeros_like(v)
    return np.where(v > min_speed_mps, np.asarray(yaw_rate, float) / np.maximum(v, min_speed_mps), 0.0)


class RangeSensor(RowTable):
    """Forward range sensor (radar/lidar-like) towards the nearest vehicle ahead.

    The sensor sits ``front_offset_m`` ahead of the rear axle (front bumper); the target point of another vehicle is
    its rear bumper centre, ``rear_offset_m`` behind its rear axle. A target counts if it is ahead, within
    ``max_range_m``, within ``+-fov_rad/2`` of the heading, and within the corridor around the predicted path (the
    circle of the robot's current curvature, yaw rate / speed), as ACC radars select the in-path target: on a curve
    the vehicle ahead is off the heading but on the path, and a vehicle in the next lane is neither. The corridor's
    half-width is ``corridor_half_width_m``, or by default each robot's own width. A target once chosen is tracked:
    it counts while within ``keep_factor`` corridors (entering a curve, the vehicle ahead turns first and leaves the
    narrow corridor for a moment; a radar's tracker does not drop it for that). The nearest target wins. Range
    [m] and range rate [m/s] (positive when opening) get white noise, the range clipped at 0; the bearing [rad] of
    the target from the heading (positive left) is noise-free; ``NaN`` (and target ``-1``) when nothing is seen.

    One compiled call scans all robots, with a broad phase that scales to thousands of them (cheap enough to run
    every step of a small platoon).
    """

    ROW_COLUMNS = ("front_offset_m", "rear_offset_m", "corridor_m", "locked_id")

    def __init__(self, rng: np.random.Generator, max_range_m: float = 50.0, fov_rad: float = 1.0,
                 range_noise_std_m: float = 0.1, range_rate_noise_std_mps: float = 0.05,
                 corridor_half_width_m: float | None = None, keep_factor: float = 3.0) -> None:
        if keep_factor < 1.0:  # a tracked target must still count where a new one would be acquired
            raise ValueError(f"keep_factor must be >= 1, got {keep_factor}")
        self.rng = rng
        self.max_range_m = max_range_m
        self.fov_rad = fov_rad
        self.range_noise_std_m = range_noise_std_m
        self.range_rate_noise_std_mps = range_rate_noise_std_mps
        self.corridor_half_width_m = corridor_half_width_m
        self.keep_factor = keep_factor
        self.front_offset_m = np.empty(0)
        self.rear_offset_m = np.empty(0)
        self.corridor_m = np.empty(0)
        self.locked_id = np.empty(0, np.int64)  # each robot's target id at the last measurement (-1: none)

    def add(self, front_offset_m: np.ndarray, rear_offset_m: np.ndarray, width_m: np.ndarray | None = None) -> None:
        """Append robots: sensor position ahead of, and rear bumper behind, the rear axle [m]; their widths [m] set
        the corridor unless ``corridor_half_width_m`` does (neither: no corridor)."""
        front = np.asarray(front_offset_m, float)
        if self.corridor_half_width_m is not None:
            corridor = np.full(front.shape, float(self.corridor_half_width_m))
        else:
            corridor = np.full(front.shape, np.inf) if width_m is None else np.asarray(width_m, float)
        self.append_rows(front_offset_m=front, rear_offset_m=np.asarray(rear_offset_m, float), corridor_m=corridor,
                         locked_id=np.full(front.shape, -1, np.int64))

    def remove(self, rows: np.ndarray) -> None:
        """Delete robots at ``rows``."""
        self.drop_rows(rows)

    def measure(self, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray,
                noise: bool = True, yaw_rate: np.ndarray | None = None,
                ids: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """``range`` [m], ``range_rate`` [m/s], ``bearing`` [rad] and ``target`` row per robot from rear-axle poses
        and speeds; the yaw rates [rad/s] bend the predicted path (straight without them). ``ids`` name the robots
        for target tracking across measurements (default: the rows, valid while no robot is removed)."""
        ids = np.arange(len(x), dtype=np.int64) if ids is None else np.asarray(ids, np.int64)
        rng, rate, bearing, rows, _ = self.measure_ids(x, y, yaw, v, ids, noise, yaw_rate)
        return {"range": rng, "range_rate": rate, "bearing": bearing, "target": rows}

    def measure_ids(self, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray, ids: np.ndarray,
                    noise: bool = True, yaw_rate: np.ndarray | None = None,
                    universes: tuple[np.ndarray, np.ndarray] | None = None,
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Range [m], range rate [m/s], bearing [rad] (noise-free), target row and target id (from ``ids``) per
        robot. ``universes``: ``core.universes.universe_segments`` of the rows, each universe scanned alone."""
        args = (x, y, yaw, v, self.front_offset_m, self.rear_offset_m, ids, float(self.max_range_m),
                0.5 * float(self.fov_rad), path_curvature(yaw_rate, v), self.corridor_m, self.locked_id,
                float(self.keep_factor))
        if universes is None:
            rng_out, rate_out, bearing, rows, target = _range_scan(*args)
        else:
            rng_out, rate_out, bearing, rows, target = _range_scan_universes(*args, *universes)
        self.locked_id = target.copy()
        if noise and len(x):
            self.add_noise(rng_out, rate_out, self.rng.standard_normal((2, len(x))))
        return rng_out, rate_out, bearing, rows, target

    def add_noise(self, rng_out: np.ndarray, rate_out: np.ndarray, e: np.ndarray) -> None:
        """Adds the white noise to a noise-free measurement in place, from standard normals ``e`` of shape
        ``(2, n)`` (range, then range rate); the range stays >= 0."""
        rng_out += self.range_noise_std_m * e[0]
        rate_out += self.range_rate_noise_std_mps * e[1]
        np.maximum(rng_out, 0.0, out=rng_out)  # a distance: noise never makes it negative (NaN stays NaN)


def range_port(sensor: RangeSensor, truth: Mapping[str, np.ndarray], ids: np.ndarray,
               bearing_noise: KeyedNormal | None, bearing_noise_std_rad: float,
               universes: tuple[np.ndarray, np.ndarray] | None = None) -> Mapping[str, np.ndarray]:
    """The physics federate's ``range`` port: targets now, the noisy columns when first read (a law that does not
    use the range sensor never pays for its noise). The sensor's noise (a ``KeyedNormal``) and ``bearing_noise``
    are keyed by robot and tick and taken in this tick's order, so they are the same whenever they are computed;
    the scan's arrays are new at every measurement."""
    rng, rate, bearing, _, target = sensor.measure_ids(truth["x"], truth["y"], truth["yaw"], truth["v"], ids,
                                                       noise=False, yaw_rate=truth["yaw_rate"], universes=universes)
    n = len(rng)
    if not n:
        return {"id": ids, "range_m": rng, "range_rate_mps": rate, "bearing_rad": bearing, "target": target}
    assert isinstance(sensor.rng, KeyedNormal)
    range_noise = sensor.rng.deferred_standard_normal((2, n))
    bearing_draw = None if bearing_noise is None else bearing_noise.deferred_standard_normal(n)

    def noisy_range() -> dict[str, np.ndarray]:
        sensor.add_noise(rng, rate, range_noise())
        return {"range_m": rng, "range_rate_mps": rate}

    def noisy_bearing() -> dict[str, np.ndarray]:
        return {"bearing_rad": bearing if bearing_draw is None else bearing + bearing_noise_std_rad * bearing_draw()}

    parts = {"range_m": LazyColumns.all_at_once(("range_m", "range_rate_mps"), noisy_range),
             "bearing_rad": LazyColumns.all_at_once(("bearing_rad",), noisy_bearing)}
    parts["range_rate_mps"] = parts["range_m"]
    fixed = {"id": ids, "target": target}
    return LazyColumns(("id", "range_m", "range_rate_mps", "bearing_rad", "target"),
                       lambda name: fixed[name] if name in fixed else parts[name][name])
