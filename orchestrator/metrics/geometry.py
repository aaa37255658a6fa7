"""Time series and path geometry behind the metrics: robots' samples, L2 norms, distances to driven paths."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

Columns = Mapping[str, np.ndarray]


@dataclass
class Series:
    """One robot's samples, time-sorted."""

    t_ns: np.ndarray
    cols: dict[str, np.ndarray]


def split_by_robot(trace: Columns) -> dict[int, Series]:
    """Rows of a vehicles trace grouped per robot, each sorted by time."""
    order = np.lexsort((trace["t_ns"], trace["robot"]))
    robots = trace["robot"][order]
    cuts = np.flatnonzero(np.diff(robots)) + 1
    out = {}
    for rows in np.split(order, cuts):
        if len(rows) == 0:
            continue
        out[int(trace["robot"][rows[0]])] = Series(
            trace["t_ns"][rows], {k: np.asarray(v)[rows] for k, v in trace.items() if k not in ("t_ns", "robot")}
        )
    return out


def l2_norm(y: np.ndarray, dt: float) -> float:
    """sqrt(sum y^2 dt)."""
    return float(np.sqrt(np.sum(np.square(y)) * dt))


def signed_path_distance(points: np.ndarray, path: np.ndarray) -> np.ndarray:
    """Signed distance from each point to a polyline (positive: left of the direction of travel)."""
    return path_projection(points, path)[0]


def path_projection(points: np.ndarray, path: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Signed distance from each point to a polyline (positive: left of the direction of travel) and the index of
    the nearest path vertex.

    The nearest vertex is found with a k-d tree; the distance is then taken to the better of its two adjacent
    segments, so densely sampled paths give the exact perpendicular distance.
    """
    if len(path) < 2:
        return np.full(len(points), np.nan), np.zeros(len(points), np.int64)
    from scipy.spatial import cKDTree  # here, not at import: scipy costs a fifth of a second a run need not wait for

    _, idx = cKDTree(path).query(points)
    best = np.full(len(points), np.inf)
    signed = np.zeros(len(points))
    for seg_start in (np.maximum(idx - 1, 0), np.minimum(idx, len(path) - 2)):
        a = path[seg_start]
        b = path[seg_start + 1]
        ab = b - a
        length2 = np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-18)
        u = np.clip(np.einsum("ij,ij->i", points - a, ab) / length2, 0.0, 1.0)
        foot = a + u[:, None] * ab
        d = np.linalg.norm(points - foot, axis=1)
        cross = ab[:, 0] * (points[:, 1] - a[:, 1]) - ab[:, 1] * (points[:, 0] - a[:, 0])
        better = d < best
        best = np.where(better, d, best)
        signed = np.where(better, np.sign(cross) * d, signed)
    return signed, idx


def path_with_tail(series: Series, tail_m: float, via: Sequence[Sequence[float]] = ()) -> np.ndarray:
    """A robot's driven path, extended backwards to where it came from before the run: through ``via``, the start
    poses ``(x, y, yaw)`` of the robots behind it (nearest first: they start on its way, along its heading or along
    a track), then along the last one's heading; without ``via``, along its own initial heading. ``tail_m``: the
    length of the straight part beyond the last start pose."""
    x, y, yaw = series.cols["x"], series.cols["y"], series.cols["yaw"]
    corners = [(float(x[0]), float(y[0]))] + [(float(p[0]), float(p[1])) for p in via]
    heading = float(via[-1][2]) if len(via) else float(yaw[0])
    end = corners[-1]
    corners.append((end[0] - tail_m * np.cos(heading), end[1] - tail_m * np.sin(heading)))
    pieces = []
    for (ax, ay), (bx, by) in itertools.pairwise(corners[::-1]):  # from the far end towards the robot's start
        n = max(int(np.hypot(bx - ax, by - ay) / 0.05), 1)
        r = np.arange(n) / n
        pieces.append(np.column_stack([ax + r * (bx - ax), ay + r * (by - ay)]))
    return np.vstack([*pieces, np.column_stack([x, y])])


def aligned(a: Series, b: Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Common times of two series and the row indices of each."""
    common, ia, ib = np.intersect1d(a.t_ns, b.t_ns, assume_unique=True, return_indices=True)
    return common, ia, ib
