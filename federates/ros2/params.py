"""The ROS 2 bridge's parameters (the scenario's ``params:``), validated with messages that name the field."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.params import raise_at

TOPIC_KINDS = ("odom", "ground_truth", "range", "cam", "markers")
"""What the bridge can publish besides /clock (``topics:`` selects among them)."""

NAME_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
"""A ROS name token: a node name, a robot name inside a topic."""
TOPIC_NAME = re.compile(r"^/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$")


class Ros2Params(BaseModel):
    """Parameters of ``type: ros2`` (``docs/bridges.md``, section ROS 2, has the whole story)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    period_s: float = Field(0.02, gt=0, description="[s] bridge period: publish, and in lock-step wait for commands")
    mode: Literal["free", "lockstep"] = Field(
        "free", description="free: take the commands that arrived since the last step; lockstep: wait each period "
        "for every driven robot's command stamped with that period's time")
    stamped: bool | None = Field(
        None, description="cmd_vel as geometry_msgs/TwistStamped (true) or Twist (false); default: stamped in "
        "lock-step (required there), plain Twist in free mode")
    lockstep_timeout_s: float = Field(10.0, gt=0, le=3600, description="[s] wall time to wait for a period's "
                                      "commands before the run fails")
    discovery_timeout_s: float = Field(
        30.0, gt=0, le=3600, description="[s] lock-step: wall time to wait for the cmd_vel publishers to be "
        "discovered, before the first period and after a spawn (DDS discovery on a loaded machine can take "
        "seconds, far longer than a period's answer)")
    domain_id: int | None = Field(None, ge=0, le=232, description="ROS_DOMAIN_ID of the bridge's node "
                                  "(default: the environment's)")
    wait_for_subscribers_s: float = Field(
        0.0, ge=0, le=3600, description="[s] before the first step, wait that long at most for subscribers to be "
        "discovered (messages sent before discovery are lost)")
    node_name: str = Field("coopsim", description="name of the bridge's ROS 2 node")
    qos_depth: int = Field(100, ge=1, le=100_000, description="history depth of the reliable topics")
    topics: tuple[Literal["odom", "ground_truth", "range", "cam", "markers"], ...] = Field(
        TOPIC_KINDS, description="what to publish besides /clock")
    markers_topic: str = Field("/coopsim/markers", description="topic of the visualization_msgs/MarkerArray")
    markers_period_s: float = Field(0.1, gt=0, description="[s] how often the markers are published (at the "
                                    "first bridge period at or after each multiple)")
    marker_height_m: float = Field(0.0, ge=0, le=10, description="[m] height of the robots' boxes (0: their width, "
                                   "at most 1.5 m)")
    range_min_m: float = Field(0.0, ge=0, description="[m] Range.min_range")
    range_max_m: float = Field(50.0, gt=0, description="[m] Range.max_range (physics.range_sensor.max_range_m)")
    range_fov_rad: float = Field(1.0, gt=0, le=6.2832, description="[rad] Range.field_of_view "
                                 "(physics.range_sensor.fov_rad)")
    origin_lat_deg: float = Field(51.4934, gt=-89.9, lt=89.9, description="[deg] WGS84 latitude of the local "
                                  "origin, for the CAMs' positions (the scenario's origin.lat_deg)")
    origin_lon_deg: float = Field(7.4136, ge=-180, le=180, description="[deg] WGS84 longitude of the local origin "
                                  "(the scenario's origin.lon_deg)")
    start_utc_s: float = Field(1_704_067_200.0, ge=0.0, le=4.0e9, description="[s] UTC at simulation time zero, "
                               "for the CAMs' generationDeltaTime (channel.start_utc_s)")
    station_type: int = Field(5, ge=0, le=255, description="CDD StationType of the CAMs (5 passenger car)")

    @field_validator("node_name")
    @classmethod
    def _node_name(cls, value: str) -> str:
        if not NAME_TOKEN.match(value):
            raise ValueError(f"must be a ROS name (letters, digits, '_', not starting with a digit), got '{value}'")
        return value

    @field_validator("markers_topic")
    @classmethod
    def _topic(cls, value: str) -> str:
        if not TOPIC_NAME.match(value):
            raise ValueError(f"must be a ROS topic name such as '/coopsim/markers', got '{value}'")
        return value

    @field_validator("topics")
    @classmethod
    def _once(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"lists a kind twice: {list(value)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Ros2Params:
        if self.mode == "lockstep" and self.stamped is False:
            raise_at("Ros2Params", [(("stamped",), "mode lockstep needs stamped cmd_vel (geometry_msgs/TwistStamped "
                                     "with header.stamp = the period's time): leave 'stamped' out or set it true",
                                     False)])
        if self.range_min_m >= self.range_max_m:
            message = f"must be below range_max_m ({self.range_max_m:g}), got {self.range_min_m:g}"
            raise_at("Ros2Params", [(("range_min_m",), message, self.range_min_m)])
        return self

    @property
    def cmd_stamped(self) -> bool:
        """Whether cmd_vel is TwistStamped."""
        return self.mode == "lockstep" if self.stamped is None else self.stamped
