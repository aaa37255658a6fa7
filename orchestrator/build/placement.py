"""Start poses: a platoon's leader at its start, each follower behind its predecessor along the leader's heading or,
on a track, along the track; lanes as sideways offsets of a path.

Frames follow REP-103 (x east, y north, yaw counter-clockwise from east); "left" is +90 degrees from the heading,
so a positive lane offset moves a platoon to the left of its direction of travel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Track:
    """A polyline the leader drives (``closed``: the last vertex joins the first)."""

    points: np.ndarray  # (n, 2) vertices [m]
    closed: bool

    @property
    def _vertices(self) -> np.ndarray:
        return np.vstack([self.points, self.points[:1]]) if self.closed else self.points

    @property
    def length_m(self) -> float:
        return float(np.hypot(*np.diff(self._vertices, axis=0).T).sum())

    def pose_at(self, s: float) -> dict[str, float]:
        """Point and heading at arc length ``s`` from the first vertex. A closed track wraps around; an open one
        continues straight beyond its ends (a follower placed behind the start of an open path stands on the
        extension of the first segment)."""
        pts = self._vertices
        seg = np.diff(pts, axis=0)
        lengths = np.hypot(seg[:, 0], seg[:, 1])
        cum = np.concatenate([[0.0], np.cumsum(lengths)])
        if self.closed:
            s = s % cum[-1]
        k = int(np.clip(np.searchsorted(cum, s, side="right") - 1, 0, len(seg) - 1))
        r = (s - cum[k]) / lengths[k]  # beyond [0, 1] only past an open path's ends
        x, y = pts[k] + r * seg[k]
        return {"x": float(x), "y": float(y), "yaw": float(np.arctan2(seg[k, 1], seg[k, 0]))}

    def shifted(self, offset_m: float) -> Track:
        """The same track ``offset_m`` to the left (a lane): each segment moved along its left normal, vertices
        where neighbouring moved segments meet (mitre joints)."""
        if offset_m == 0.0:
            return self
        pts = self.points
        n = len(pts)
        seg = np.diff(self._vertices, axis=0)
        normal = np.stack([-seg[:, 1], seg[:, 0]], axis=1) / np.hypot(seg[:, 0], seg[:, 1])[:, None]
        out = np.empty_like(pts, dtype=float)
        for i in range(n):
            before = normal[i - 1] if (i > 0 or self.closed) else normal[0]
            after = normal[i] if i < len(normal) else normal[-1]
            mitre = before + after
            scale = 1.0 + float(before @ after)  # |mitre|^2 / 2; offsetting by d needs mitre * d / scale
            out[i] = pts[i] + offset_m * (mitre / scale if scale > 1e-9 else after)
        return Track(out, self.closed)


def shift_left(pose: dict[str, float], offset_m: float) -> dict[str, float]:
    """``pose`` moved ``offset_m`` to the left of its heading."""
    if offset_m == 0.0:
        return dict(pose)
    return {**pose, "x": pose["x"] - offset_m * np.sin(pose["yaw"]), "y": pose["y"] + offset_m * np.cos(pose["yaw"])}


def behind(pose: dict[str, float], spacing_m: float) -> dict[str, float]:
    """The pose ``spacing_m`` behind ``pose`` along its heading, with the same heading."""
    yaw = pose["yaw"]
    return {"x": pose["x"] - spacing_m * np.cos(yaw), "y": pose["y"] - spacing_m * np.sin(yaw), "yaw": yaw}
