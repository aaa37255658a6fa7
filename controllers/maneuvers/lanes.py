"""Lanes as lateral offsets from a reference path, and pure pursuit onto a lane (vectorised over vehicles).

A lane is the path moved sideways by an offset d (left of the direction of travel, REP-103). A vehicle steers onto
the lane by pure pursuit (Coulter 1992: kappa = 2 y_l / L^2 towards a target point at the look-ahead distance)
whose target is the point of the path ``L`` ahead of the vehicle's projection, moved d to the left. A lane change
moves d along a fifth-order ramp d(t) = d0 + (d1 - d0) q(tau), q = 10 tau^3 - 15 tau^4 + 6 tau^5 (zero speed and
acceleration at both ends; the polynomial lane change of the platooning literature), so the steering never jumps.
"""

from __future__ import annotations

import numpy as np


def quintic(tau: np.ndarray) -> np.ndarray:
    """q(tau) = 10 tau^3 - 15 tau^4 + 6 tau^5 on [0, 1], clamped outside."""
    t = np.clip(tau, 0.0, 1.0)
    return t * t * t * (10.0 + t * (-15.0 + 6.0 * t))


class LanePath:
    """A reference path: a polyline (open: extended along its end segments; closed: a loop)."""

    def __init__(self, points: np.ndarray, closed: bool) -> None:
        pts = np.asarray(points, np.float64)
        if closed:
            pts = np.vstack([pts, pts[:1]])
        seg = np.diff(pts, axis=0)
        length = np.hypot(seg[:, 0], seg[:, 1])
        keep = length > 1e-9
        self.start = pts[:-1][keep]
        self.seg = seg[keep]
        self.length = length[keep]
        self.heading = np.arctan2(self.seg[:, 1], self.seg[:, 0])
        self.cum = np.concatenate([[0.0], np.cumsum(self.length)])  # arc length at each segment's start
        self.total = float(self.cum[-1])
        self.closed = closed

    def project(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Arc length of each point's nearest point on the path and its signed offset (left positive) [m]."""
        dx = x[:, None] - self.start[None, :, 0]
        dy = y[:, None] - self.start[None, :, 1]
        t = (dx * self.seg[None, :, 0] + dy * self.seg[None, :, 1]) / (self.length ** 2)[None, :]
        lo = np.zeros_like(t)
        hi = np.ones_like(t)
        if not self.closed:  # an open path goes on along its first and last segments
            lo[:, 0] = -np.inf
            hi[:, -1] = np.inf
        t = np.clip(t, lo, hi)
        px = dx - t * self.seg[None, :, 0]
        py = dy - t * self.seg[None, :, 1]
        best = np.argmin(px * px + py * py, axis=1)
        rows = np.arange(len(x))
        along = self.cum[best] + t[rows, best] * self.length[best]
        cross = (self.seg[best, 0] * dy[rows, best] - self.seg[best, 1] * dx[rows, best]) / self.length[best]
        return along, cross

    def point(self, along: np.ndarray, offset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The point at arc length ``along`` moved ``offset`` to the left of the path there."""
        s = np.mod(along, self.total) if self.closed else along
        k = np.clip(np.searchsorted(self.cum, s, side="right") - 1, 0, len(self.length) - 1)
        u = (s - self.cum[k]) / self.length[k]
        h = self.heading[k]
        x = self.start[k, 0] + u * self.seg[k, 0] - np.sin(h) * offset
        y = self.start[k, 1] + u * self.seg[k, 1] + np.cos(h) * offset
        return x, y


def pursue_lane(path: LanePath, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray, offset: np.ndarray,
                lookahead_time_s: float, min_lookahead_m: float, max_curvature: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Yaw rate [rad/s] that steers each vehicle onto the lane ``offset`` [m] left of ``path`` (pure pursuit with
    look-ahead max(L_min, t_L |v|)), and each vehicle's present offset from the path [m]."""
    along, now = path.project(x, y)
    lookahead = np.maximum(min_lookahead_m, lookahead_time_s * np.abs(v))
    tx, ty = path.point(along + lookahead, offset)
    dx, dy = tx - x, ty - y
    d2 = np.maximum(dx * dx + dy * dy, 1e-12)
    kappa = np.clip(2.0 * (-np.sin(yaw) * dx + np.cos(yaw) * dy) / d2, -max_curvature, max_curvature)
    return v * kappa, now
