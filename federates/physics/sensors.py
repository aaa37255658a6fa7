"""Vectorised pose sensors: wheel odometry and dead reckoning, IMU yaw rate, GNSS-like pose, and a small EKF fusing
odometry with GNSS (the range sensor is ``range_scan.py``).

Every class holds per-robot arrays in the group's row order with ``add``/``remove`` like the vehicle models. All
randomness comes from numpy Generators passed in (the project derives them with ``core.rng.stream``): the
per-step noise of a sensor group from the Generator given to the constructor (one vectorised draw per step), the
constant per-robot errors (scale factors, biases) from optional per-robot Generators given to ``add`` so that adding
a robot does not change another robot's biases.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from core.rowtable import RowTable


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


class DeadReckoning(RowTable):
    """Rear-wheel odometry (slip included, from ``DynamicSingleTrack.wheel_odometry()``) with noise and scale-factor
    errors, integrated to a pose that drifts.

    Per step each wheel reports ``d_meas = d (1 + scale_err) + N(0, (noise_rel |d| + noise_abs)^2)``; the pose moves
    by ``ds = (d_l + d_r)/2`` and turns by ``(d_r - d_l)/track`` (``heading_source="wheels"``) or by the given IMU
    yaw rate times ``dt`` (``"imu"``).
    """

    ROW_COLUMNS = ("_track", "_scale", "x", "y", "yaw", "speed", "yaw_rate", "distance", "ds", "dth")

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
        self.append_rows(_track=np.broadcast_to(np.asarray(track_m, float), (n,)),
                         _scale=_per_robot(n, rngs, self.rng, self.scale_error_std, 2),
                         x=np.asarray(x, float), y=np.asarray(y, float), yaw=np.asarray(yaw, float),
                         speed=np.zeros(n), yaw_rate=np.zeros(n), distance=np.zeros(n), ds=np.zeros(n), dth=np.zeros(n))

    def remove(self, rows: np.ndarray) -> None:
        """Delete robots at ``rows``."""
        self.drop_rows(rows)

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


class Imu(RowTable):
    """Yaw-rate gyro (and optional body accelerations) with white noise and a constant per-robot bias."""

    ROW_COLUMNS = ("bias",)

    def __init__(self, rng: np.random.Generator, yaw_rate_noise_std: float = 0.005, yaw_rate_bias_std: float = 0.0,
                 accel_noise_std: float = 0.05) -> None:
        self.rng = rng
        self.yaw_rate_noise_std = yaw_rate_noise_std  # [rad/s]
        self.yaw_rate_bias_std = yaw_rate_bias_std  # [rad/s]
        self.accel_noise_std = accel_noise_std  # [m/s^2]
        self.bias = np.empty(0)

    def add(self, n: int, rngs: Sequence[np.random.Generator] | None = None) -> None:
        """Append ``n`` robots, drawing their gyro biases."""
        self.append_rows(bias=_per_robot(n, rngs, self.rng, self.yaw_rate_bias_std)[:, 0])

    def remove(self, rows: np.ndarray) -> None:
        """Delete robots at ``rows``."""
        self.drop_rows(rows)

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


class PoseFusion(RowTable):
    """Extended Kalman filter over ``[x, y, yaw]`` per robot: odometry predicts, GNSS corrects.

    Prediction uses the odometric increments ``(ds, dth)`` of ``DeadReckoning`` (or any source) with noise growing
    with the distance driven (``odo_noise_rel`` of ``ds``, ``yaw_noise_per_m`` [rad/m]); the update takes GNSS
    ``x, y, yaw`` where ``valid``. Thrun, Burgard, Fox, *Probabilistic Robotics*, table 3.3 (EKF) and sec. 5.4
    (odometry motion model).
    """

    ROW_COLUMNS = ("x", "y", "yaw", "P")

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
        p0 = np.diag([self.initial_pos_std_m**2, self.initial_pos_std_m**2, self.initial_yaw_std_rad**2])
        self.append_rows(x=np.asarray(x, float), y=np.asarray(y, float), yaw=np.asarray(yaw, float),
                         P=np.broadcast_to(p0, (n, 3, 3)))

    def remove(self, rows: np.ndarray) -> None:
        """Delete robots at ``rows``."""
        self.drop_rows(rows)

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
