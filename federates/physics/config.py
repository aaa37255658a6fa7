"""The scenario's ``physics`` block: what the controllers see of their own vehicle, sensor noise, collisions."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MIN_PERIOD_S = 1e-6
"""Shortest sensor period [s] (1 us, the scenario's shortest step)."""


class _Strict(BaseModel):
    """Unknown keys are errors; numbers are finite."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class OdometryConfig(_Strict):
    """Wheel odometry integrated to a dead-reckoning pose (drifts with slip, noise and scale errors)."""

    noise_rel: float = Field(0.01, ge=0, description="white noise per step, relative to the distance [-]")
    noise_abs_m: float = Field(0.0, ge=0, description="white noise per step, absolute [m]")
    scale_error_std: float = Field(0.0, ge=0, description="per-wheel scale-factor error, drawn once per robot [-]")
    heading_source: Literal["wheels", "imu"] = Field("imu", description="heading from wheel difference or IMU")


class ImuConfig(_Strict):
    """Yaw-rate gyro."""

    yaw_rate_noise_std: float = Field(0.005, ge=0, description="[rad/s] white noise")
    yaw_rate_bias_std: float = Field(0.0, ge=0, description="[rad/s] constant bias drawn once per robot")
    accel_noise_std: float = Field(0.05, ge=0, description="[m/s^2] white noise of the longitudinal accelerometer")


class GnssConfig(_Strict):
    """GNSS-like absolute pose, fused with odometry when ``estimate: odometry_gnss``."""

    period_s: float = Field(0.1, ge=MIN_PERIOD_S, description="[s] between fixes (1 us to the run's length)")
    pos_std_m: float = Field(0.5, ge=0, description="[m] position noise")
    yaw_std_rad: float = Field(0.05, ge=0, description="[rad] heading noise")


class FusionConfig(_Strict):
    """Process noise of the odometry + GNSS EKF (``estimate: odometry_gnss``), applied at every physics step.

    The filter has no bias or scale states, so these also have to cover the systematic odometry errors (wheel scale
    factors, gyro bias, slip); the defaults keep it consistent with a few percent of those at 10 ms steps.
    """

    odo_noise_rel: float = Field(0.05, gt=0, description="distance noise std per step, relative to the distance [-]")
    yaw_noise_per_m: float = Field(0.1, gt=0, description="[rad/m] heading noise std per step per metre of the step")


class RangeConfig(_Strict):
    """Forward range sensor towards the vehicle ahead (ACC, CACC fallback)."""

    max_range_m: float = Field(50.0, gt=0)
    fov_rad: float = Field(1.0, gt=0, le=6.2832, description="full opening angle [rad]")
    corridor_half_width_m: float | None = Field(
        None, gt=0, description="targets must lie this close to the predicted path (the circle of the robot's yaw "
        "rate / speed) [m]; null: the robot's own width"
    )
    keep_factor: float = Field(3.0, ge=1, description="a target once chosen is kept while within this many "
                                                      "corridors of the predicted path (target tracking)")
    range_noise_std_m: float = Field(0.1, ge=0)
    range_rate_noise_std_mps: float = Field(0.05, ge=0)
    bearing_noise_std_rad: float = Field(0.005, ge=0, description="white noise on the target's bearing [rad]")
    enabled: bool = Field(True, description="publish the `range` port")
    period_s: float = Field(0.05, ge=MIN_PERIOD_S, description="[s] between measurements (20 Hz, a typical radar "
                            "cycle; 1 us to the run's length); the port holds the last one in between")


class PhysicsConfig(_Strict):
    """What the physics federate simulates besides the vehicle bodies."""

    estimate: Literal["ground_truth", "odometry", "odometry_gnss"] = Field(
        "ground_truth", description="the state estimate the controllers use"
    )
    odometry: OdometryConfig = Field(default_factory=OdometryConfig)
    imu: ImuConfig = Field(default_factory=ImuConfig)
    gnss: GnssConfig = Field(default_factory=GnssConfig)
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    range_sensor: RangeConfig = Field(default_factory=RangeConfig)
    check_collisions: bool = Field(True, description="test the vehicle bodies for overlap every step")
    stop_on_collision: bool = Field(False, description="end the run at the first collision (else record and go on)")
