"""Vectorised sensors: wheel odometry and dead reckoning, IMU yaw rate, GNSS-like pose, range to the vehicle ahead,
and a small EKF fusing odometry with GNSS.

Every class holds per-robot arrays in the group's row order with ``add``/``remove`` like the vehicle models. All
randomness comes from numpy Generators passed in (the project derives them with ``orchestrator.core.rng.stream``): the
per-step noise of a sensor group from the Generator given to the constructor (one vectorised draw per step), the
constant per-robot errors (scale factors, biases) from optional per-robot Generators given to ``add`` so that adding
a robot does not change another robot's biases.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from .collisions import near_pairs


def _per_robot(n: int, rngs: Sequence[np.random.Generator] | None, fallback: np.random.Generator,
               std: float, size: int = 1) -> np.ndarray:
    """``n x size`` normal draws with ``std``: one Generator per robot if given, else the fallback."""
    if std == 0.0:
        return np.zeros((n, size))
    if rngs is None:
        return fallback.normal(0.0, std, (n, size))
    if len(rngs) != n:
        raise ValueError(f"need one Generator per added robot ({n}), got {len(rngs)}")
    return np.array([g.normal(0.0, std, size) for g in rngs]).reshape(n, size)


@njit(cache=True)
def _odometry_kernel(x, y, yaw, dl, dr, scale, noise, noise_rel, noise_abs, track, use_imu, imu_dth, ds_out,
                     dth_out):  # pragma: no cover - compiled
    """Noisy wheel distances, then midpoint (second-order) pose integration, in place."""
    for i in range(x.shape[0]):
        ml = dl[i] * (1.0 + scale[i, 0]) + noise[i, 0] * (noise_rel * abs(dl[i]) + noise_abs)
        mr = dr[i] * (1.0 + scale[i, 1]) + noise[i, 1] * (noise_rel * abs(dr[i]) + noise_abs)
        ds = 0.5 * (ml + mr)
        dth = imu_dth[i] if use_imu else (mr - ml) / track[i]
        mid = yaw[i] + 0.5 * dth
        x[i] += ds * np.cos(mid)
        y[i] += ds * np.sin(mid)
        th = yaw[i] + dth
        if th > np.pi:
            th -= 2.0 * np.pi
        elif th < -np.pi:
            th += 2.0 * np.pi
        yaw[i] = th
        ds_out[i] = ds
        dth_out[i] = dth


class DeadReckoning:
    """Rear-wheel odometry (slip included, from ``DynamicSingleTrack.wheel_odometry()``) with noise and scale-factor
    errors, integrated to a pose that drifts.

    Per step each wheel reports ``d_meas = d (1 + scale_err) + N(0, (noise_rel |d| + noise_abs)^2)``; the pose moves
    by ``ds = (d_l + d_r)/2`` and turns by ``(d_r - d_l)/track`` (``heading_source="wheels"``) or by the given IMU
    yaw rate times ``dt`` (``"imu"``).
    """

    def __init__(self, rng: np.random.Generator, noise_rel: float = 0.01, noise_abs_m: float = 0.0,
                 scale_error_std: float = 0.0, heading_source: str = "wheels") -> None:
        if heading_source not in ("wheels", "imu"):
            raise ValueError(f"unknown heading_source '{heading_source}'; allowed: wheels, imu")
        self.rng = rng
        self.noise_rel = noise_rel
        self.noise_abs_m = noise_abs_m
        self.scale_error_std = scale_error_std
        self.heading_source = heading_source
        self._track = np.empty(0)
        self._scale = np.empty((0, 2))  # wheel scale-factor errors, left and right [-]
        self.x, self.y, self.yaw = np.empty(0), np.empty(0), np.empty(0)
        self.speed = np.empty(0)  # last step's odometric speed [m/s]
        self.yaw_rate = np.empty(0)  # last step's heading change / dt [rad/s]
        self.distance = np.empty(0)  # odometric distance travelled [m]
        self.ds, self.dth = np.empty(0), np.empty(0)  # last step's increments [m], [rad] (for PoseFusion.predict)

    def add(self, track_m: np.ndarray, x: np.ndarray, y: np.ndarray, yaw: np.ndarray,
            rngs: Sequence[np.random.Generator] | None = None) -> None:
        """Append robots with their rear track [m] and initial pose (usually the true one)."""
        n = len(x)
        self._track = np.concatenate([self._track, np.broadcast_to(np.asarray(track_m, float), (n,))])
        self._scale = np.vstack([self._scale, _per_robot(n, rngs, self.rng, self.scale_error_std, 2)])
        for name, arr in (("x", x), ("y", y), ("yaw", yaw)):
            setattr(self, name, np.concatenate([getattr(self, name), np.asarray(arr, float)]))
        self.speed = np.concatenate([self.speed, np.zeros(n)])
        self.yaw_rate = np.concatenate([self.yaw_rate, np.zeros(n)])
        self.distance = np.concatenate([self.distance, np.zeros(n)])
        self.ds = np.concatenate([self.ds, np.zeros(n)])
        self.dth = np.concatenate([self.dth, np.zeros(n)])

    def remove(self, rows: np.ndarray) -> None:
        """Delete robots at ``rows``."""
        self._track = np.delete(self._track, rows)
        self._scale = np.delete(self._scale, rows, axis=0)
        for name in ("x", "y", "yaw", "speed", "yaw_rate", "distance", "ds", "dth"):
            setattr(self, name, np.delete(getattr(self, name), rows))

    def step(self, dist_rl: np.ndarray, dist_rr: np.ndarray, dt: float,
             yaw_rate_meas: np.ndarray | None = None) -> None:
        """Measure the wheel distances [m] of the last step and integrate the dead-reckoning pose."""
        n = len(self.x)
        use_imu = self.heading_source == "imu"
        if use_imu and yaw_rate_meas is None:
            raise ValueError("heading_source 'imu' needs yaw_rate_meas")
        imu_dth = np.asarray(yaw_rate_meas, float) * dt if use_imu else self.dth
        noise = np.ascontiguousarray(self.rng.standard_normal((2, n)).T)  # robots on the last axis when drawing
        ds, dth = np.empty(n), np.empty(n)
        _odometry_kernel(self.x, self.y, self.yaw, np.asarray(dist_rl, float), np.asarray(dist_rr, float),
                         self._scale, noise, self.noise_rel, self.noise_abs_m, self._track, use_imu, imu_dth, ds,
                         dth)
        self.ds, self.dth = ds, dth
        self.speed = ds / dt
        self.yaw_rate = dth / dt
        self.distance += ds

    @property
    def pose(self) -> dict[str, np.ndarray]:
        """Dead-reckoned ``x, y, yaw`` (live arrays)."""
        return {"x": self.x, "y": self.y, "yaw": self.yaw}


class Imu:
    """Yaw-rate gyro (and optional body accelerations) with white noise and a constant per-robot bias."""

    def __init__(self, rng: np.random.Generator, yaw_rate_noise_std: float = 0.005, yaw_rate_bias_std: float = 0.0,
                 accel_noise_std: float = 0.05) -> None:
        self.rng = rng
        self.yaw_rate_noise_std = yaw_rate_noise_std  # [rad/s]
        self.yaw_rate_bias_std = yaw_rate_bias_std  # [rad/s]
        self.accel_noise_std = accel_noise_std  # [m/s^2]
        self.bias = np.empty(0)

    def add(self, n: int, rngs: Sequence[np.random.Generator] | None = None) -> None:
        """Append ``n`` robots, drawing their gyro biases."""
        self.bias = np.concatenate([self.bias, _per_robot(n, rngs, self.rng, self.yaw_rate_bias_std)[:, 0]])

    def remove(self, rows: np.ndarray) -> None:
        """Delete robots at ``rows``."""
        self.bias = np.delete(self.bias, rows)

    def measure(self, yaw_rate: np.ndarray, ax: np.ndarray | None = None,
                ay: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """``yaw_rate`` [rad/s] (and ``ax``, ``ay`` [m/s^2] if given) as measured."""
        n = len(yaw_rate)
        channels = 1 + (ax is not None) + (ay is not None)
        e = self.rng.standard_normal((channels, n))  # one draw for all channels of this step
        out = {"yaw_rate": yaw_rate + self.bias + self.yaw_rate_noise_std * e[0]}
        if ax is not None:
            out["ax"] = ax + self.accel_noise_std * e[1]
        if ay is not None:
            out["ay"] = ay + self.accel_noise_std * e[channels - 1]
        return out


class Gnss:
    """GNSS-like pose fix: true pose plus white noise (position per axis, heading); stateless across robots."""

    def __init__(self, rng: np.random.Generator, pos_std_m: float = 0.5, yaw_std_rad: float = 0.05) -> None:
        self.rng = rng
        self.pos_std_m = pos_std_m
        self.yaw_std_rad = yaw_std_rad

    def measure(self, x: np.ndarray, y: np.ndarray, yaw: np.ndarray) -> dict[str, np.ndarray]:
        """Noisy ``x, y`` [m] and ``yaw`` [rad] (wrapped)."""
        n = len(x)
        e = self.rng.standard_normal((3, n))
        th = yaw + self.yaw_std_rad * e[2]
        return {"x": x + self.pos_std_m * e[0], "y": y + self.pos_std_m * e[1],
                "yaw": np.arctan2(np.sin(th), np.cos(th))}


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
def _range_kernel(pairs, sx, sy, c, s, tx, ty, vx, vy, max_range, half_fov, curvature, corridor, ids, locked,
                  keep, rng_out, rate_out, bearing_out, tgt_out):  # pragma: no cover - compiled
    for k in range(pairs.shape[0]):
        for side in range(2):
            i = pairs[k, side]
            j = pairs[k, 1 - side]
            dx = tx[j] - sx[i]
            dy = ty[j] - sy[i]
            fwd = c[i] * dx + s[i] * dy
            left = -s[i] * dx + c[i] * dy
            d = np.sqrt(dx * dx + dy * dy)
            if fwd <= 0.0 or d > max_range[i] or abs(np.arctan2(left, fwd)) > half_fov[i]:
                continue
            if not in_path(path_offset(fwd, left, curvature[i]), corridor[i], ids[j] == locked[i], keep):
                continue
            if np.isnan(rng_out[i]) or d < rng_out[i]:
                rng_out[i] = d
                rate_out[i] = ((vx[j] - vx[i]) * dx + (vy[j] - vy[i]) * dy) / max(d, 1e-9)
                bearing_out[i] = np.arctan2(left, fwd)
                tgt_out[i] = j


def path_curvature(yaw_rate: np.ndarray | None, v: np.ndarray, min_speed_mps: float = 0.1) -> np.ndarray:
    """Curvature of the predicted path, yaw rate / speed [1/m]; 0 (straight ahead) without a yaw rate or below
    ``min_speed_mps``, where the ratio means nothing."""
    v = np.asarray(v, dtype=float)
    if yaw_rate is None:
        return np.zeros_like(v)
    return np.where(v > min_speed_mps, np.asarray(yaw_rate, float) / np.maximum(v, min_speed_mps), 0.0)


class RangeSensor:
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
    """

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
        self.front_offset_m = np.concatenate([self.front_offset_m, front])
        self.rear_offset_m = np.concatenate([self.rear_offset_m, np.asarray(rear_offset_m, float)])
        self.corridor_m = np.concatenate([self.corridor_m, corridor])
        self.locked_id = np.concatenate([self.locked_id, np.full(front.shape, -1, np.int64)])

    def remove(self, rows: np.ndarray) -> None:
        """Delete robots at ``rows``."""
        self.front_offset_m = np.delete(self.front_offset_m, rows)
        self.rear_offset_m = np.delete(self.rear_offset_m, rows)
        self.corridor_m = np.delete(self.corridor_m, rows)
        self.locked_id = np.delete(self.locked_id, rows)

    def measure(self, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray,
                noise: bool = True, yaw_rate: np.ndarray | None = None,
                ids: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """``range`` [m], ``range_rate`` [m/s] and ``target`` row per robot from rear-axle poses and speeds; the
        yaw rates [rad/s] bend the predicted path (straight without them). ``ids`` name the robots for target
        tracking across measurements (default: the rows, valid while no robot is removed)."""
        n = len(x)
        ids = np.arange(n, dtype=np.int64) if ids is None else np.asarray(ids, np.int64)
        c, s = np.cos(yaw), np.sin(yaw)
        sx, sy = x + self.front_offset_m * c, y + self.front_offset_m * s
        tx, ty = x - self.rear_offset_m * c, y - self.rear_offset_m * s
        # broad phase on the rear axles: circles of radius max_range/2 + the largest offset overlap for every
        # pair whose sensor-to-target distance can be within max_range
        reach = 0.5 * self.max_range_m + float(np.max(np.abs(self.front_offset_m), initial=0.0)) + float(
            np.max(np.abs(self.rear_offset_m), initial=0.0))
        pairs = near_pairs(np.ascontiguousarray(x, float), np.ascontiguousarray(y, float), np.full(n, reach))
        rng_out = np.full(n, np.nan)
        rate_out = np.full(n, np.nan)
        bearing = np.full(n, np.nan)
        tgt = np.full(n, -1, dtype=np.int64)
        _range_kernel(pairs, sx, sy, c, s, tx, ty, v * c, v * s, np.full(n, self.max_range_m),
                      np.full(n, 0.5 * self.fov_rad), path_curvature(yaw_rate, v), self.corridor_m, ids,
                      self.locked_id, float(self.keep_factor), rng_out, rate_out, bearing, tgt)
        self.locked_id = np.where(tgt >= 0, ids[np.maximum(tgt, 0)], -1) if n else self.locked_id
        if noise:
            e = self.rng.standard_normal((2, n))
            rng_out = np.maximum(rng_out + self.range_noise_std_m * e[0], 0.0)  # a distance: never negative
            rate_out = rate_out + self.range_rate_noise_std_mps * e[1]
        return {"range": rng_out, "range_rate": rate_out, "bearing": bearing, "target": tgt}


@njit(cache=True, inline="always")
def _mat3_mul(A, B, out):  # pragma: no cover - compiled
    for r in range(3):
        for c in range(3):
            out[r, c] = A[r, 0] * B[0, c] + A[r, 1] * B[1, c] + A[r, 2] * B[2, c]


@njit(cache=True)
def _ekf_predict(x, y, yaw, P, ds, dth, q_ds, q_dth):  # pragma: no cover - compiled
    for i in range(x.shape[0]):
        d = ds[i]
        mid = yaw[i] + 0.5 * dth[i]
        cm, sm = np.cos(mid), np.sin(mid)
        x[i] += d * cm
        y[i] += d * sm
        th = yaw[i] + dth[i]
        yaw[i] = np.arctan2(np.sin(th), np.cos(th))
        # P' = F P F^T + G Q G^T with F = I + [[0,0,-d sm],[0,0,d cm],[0,0,0]], G = d(pose)/d(ds, dth)
        f02, f12 = -d * sm, d * cm
        p = P[i]
        a00 = p[0, 0] + f02 * p[2, 0]
        a01 = p[0, 1] + f02 * p[2, 1]
        a02 = p[0, 2] + f02 * p[2, 2]
        a11 = p[1, 1] + f12 * p[2, 1]
        a12 = p[1, 2] + f12 * p[2, 2]
        q0 = (q_ds * abs(d)) ** 2 + 1e-12
        q1 = (q_dth * abs(d)) ** 2 + 1e-12
        g10, g11 = -0.5 * d * sm, 0.5 * d * cm
        n00 = a00 + f02 * a02 + q0 * cm * cm + q1 * g10 * g10
        n01 = a01 + f12 * a02 + q0 * cm * sm + q1 * g10 * g11
        n11 = a11 + f12 * a12 + q0 * sm * sm + q1 * g11 * g11
        n02 = a02 + q1 * g10
        n12 = a12 + q1 * g11
        n22 = p[2, 2] + q1
        p[0, 0], p[0, 1], p[0, 2] = n00, n01, n02
        p[1, 0], p[1, 1], p[1, 2] = n01, n11, n12
        p[2, 0], p[2, 1], p[2, 2] = n02, n12, n22


@njit(cache=True)
def _ekf_update(x, y, yaw, P, zx, zy, zyaw, valid, r_pos, r_yaw):  # pragma: no cover - compiled
    R = np.diag(np.array([r_pos * r_pos, r_pos * r_pos, r_yaw * r_yaw]))
    S = np.empty((3, 3))
    K = np.empty((3, 3))
    IK = np.empty((3, 3))
    T = np.empty((3, 3))
    T2 = np.empty((3, 3))
    innov = np.empty(3)
    for i in range(x.shape[0]):
        if not valid[i]:
            continue
        p = P[i]
        for r in range(3):
            for c in range(3):
                S[r, c] = p[r, c] + R[r, c]
        Sinv = np.linalg.inv(S)
        _mat3_mul(p, Sinv, K)
        innov[0] = zx[i] - x[i]
        innov[1] = zy[i] - y[i]
        dyaw = zyaw[i] - yaw[i]
        innov[2] = np.arctan2(np.sin(dyaw), np.cos(dyaw))
        x[i] += K[0, 0] * innov[0] + K[0, 1] * innov[1] + K[0, 2] * innov[2]
        y[i] += K[1, 0] * innov[0] + K[1, 1] * innov[1] + K[1, 2] * innov[2]
        th = yaw[i] + K[2, 0] * innov[0] + K[2, 1] * innov[1] + K[2, 2] * innov[2]
        yaw[i] = np.arctan2(np.sin(th), np.cos(th))
        # Joseph form (I - K) P (I - K)^T + K R K^T keeps P symmetric positive definite
        for r in range(3):
            for c in range(3):
                IK[r, c] = (1.0 if r == c else 0.0) - K[r, c]
        _mat3_mul(IK, p, T)
        for r in range(3):
            for c in range(3):
                T2[r, c] = T[r, 0] * IK[c, 0] + T[r, 1] * IK[c, 1] + T[r, 2] * IK[c, 2]
        _mat3_mul(K, R, T)
        for r in range(3):
            for c in range(3):
                p[r, c] = T2[r, c] + T[r, 0] * K[c, 0] + T[r, 1] * K[c, 1] + T[r, 2] * K[c, 2]


class PoseFusion:
    """Extended Kalman filter over ``[x, y, yaw]`` per robot: odometry predicts, GNSS corrects.

    Prediction uses the odometric increments ``(ds, dth)`` of ``DeadReckoning`` (or any source) with noise growing
    with the distance driven (``odo_noise_rel`` of ``ds``, ``yaw_noise_per_m`` [rad/m]); the update takes GNSS
    ``x, y, yaw`` where ``valid``. Thrun, Burgard, Fox, *Probabilistic Robotics*, table 3.3 (EKF) and sec. 5.4
    (odometry motion model).
    """

    def __init__(self, odo_noise_rel: float = 0.02, yaw_noise_per_m: float = 0.01, gnss_pos_std_m: float = 0.5,
                 gnss_yaw_std_rad: float = 0.05, initial_pos_std_m: float = 0.1,
                 initial_yaw_std_rad: float = 0.02) -> None:
        self.odo_noise_rel = odo_noise_rel
        self.yaw_noise_per_m = yaw_noise_per_m
        self.gnss_pos_std_m = gnss_pos_std_m
        self.gnss_yaw_std_rad = gnss_yaw_std_rad
        self.initial_pos_std_m = initial_pos_std_m
        self.initial_yaw_std_rad = initial_yaw_std_rad
        self.x, self.y, self.yaw = np.empty(0), np.empty(0), np.empty(0)
        self.P = np.empty((0, 3, 3))

    def add(self, x: np.ndarray, y: np.ndarray, yaw: np.ndarray) -> None:
        """Append robots with their initial pose estimate."""
        n = len(x)
        for name, arr in (("x", x), ("y", y), ("yaw", yaw)):
            setattr(self, name, np.concatenate([getattr(self, name), np.asarray(arr, float)]))
        p0 = np.diag([self.initial_pos_std_m**2, self.initial_pos_std_m**2, self.initial_yaw_std_rad**2])
        self.P = np.concatenate([self.P, np.broadcast_to(p0, (n, 3, 3))]).copy()

    def remove(self, rows: np.ndarray) -> None:
        """Delete robots at ``rows``."""
        for name in ("x", "y", "yaw"):
            setattr(self, name, np.delete(getattr(self, name), rows))
        self.P = np.delete(self.P, rows, axis=0)

    def predict(self, ds: np.ndarray, dth: np.ndarray) -> None:
        """Odometry step: ``ds`` [m] driven, ``dth`` [rad] turned."""
        _ekf_predict(self.x, self.y, self.yaw, self.P, np.ascontiguousarray(ds, dtype=np.float64),
                     np.ascontiguousarray(dth, dtype=np.float64), self.odo_noise_rel, self.yaw_noise_per_m)

    def update(self, z: dict[str, np.ndarray], valid: np.ndarray | None = None) -> None:
        """GNSS correction with ``z = {x, y, yaw}`` for the rows where ``valid`` (all if None)."""
        n = len(self.x)
        ok = np.ones(n, dtype=np.bool_) if valid is None else np.asarray(valid, dtype=np.bool_)
        _ekf_update(self.x, self.y, self.yaw, self.P, np.asarray(z["x"], float), np.asarray(z["y"], float),
                    np.asarray(z["yaw"], float), ok, self.gnss_pos_std_m, self.gnss_yaw_std_rad)

    @property
    def pose(self) -> dict[str, np.ndarray]:
        """Fused ``x, y, yaw`` (live arrays)."""
        return {"x": self.x, "y": self.y, "yaw": self.yaw}
