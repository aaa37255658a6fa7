"""What the on-board range sensor tells a robot's controller, from the ``range`` port and the robot's estimate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from controllers.columns import LazyColumns
from core.rowtable import RowTable

SENSOR_FIELDS = ("gap_m", "gap_rate_mps", "target_x", "target_y")
"""Columns of ``RangeSensing.measure``: gap [m] and its rate [m/s], sensed rear bumper ahead (x, y) [m]."""


class RangeSensing(RowTable):
    """Turns range scans into the controller's sensor columns, per robot row.

    ``sensor_offset`` [m] per row: where the sensor sits (front bumper) ahead of the rear axle. A scan is placed
    in the world from the estimate at the step it arrives; the port holds the last scan between scans, and an
    old scan placed from a newer pose would be off by the distance driven since, so held scans give no position.
    """

    ROW_COLUMNS = ("sensor_offset",)

    def __init__(self) -> None:
        self.sensor_offset = np.empty(0)
        self._last: Any = None  # the range port value already placed in the world
        self._matched: tuple[Any, Any] = (None, None)  # the id arrays last found equal (range port, ours)

    def add(self, sensor_offset: np.ndarray) -> None:
        """Rows for new robots at the end."""
        self.append_rows(sensor_offset=np.asarray(sensor_offset, float))

    def remove(self, keep: np.ndarray) -> None:
        """Keeps the rows where the mask ``keep`` is True."""
        self.keep_rows(keep)

    def measure(self, range_port: Mapping[str, np.ndarray] | None, est: Mapping[str, np.ndarray],
                ids: np.ndarray) -> LazyColumns:
        """The ``SENSOR_FIELDS`` of every row (``ids``: the robots' ids in row order). Without a range sensor, or
        rows that do not match, NaN: laws then act on V2X data alone. The columns are computed when first read
        (most laws read none of them), from this step's inputs."""
        n = len(ids)
        port_ids = None if range_port is None else range_port["id"]
        known = port_ids is self._matched[0] and ids is self._matched[1]
        if port_ids is None or not (known or np.array_equal(port_ids, ids)):
            return LazyColumns(SENSOR_FIELDS, lambda name: np.full(n, np.nan))
        self._matched = (port_ids, ids)  # both id arrays are replaced, never mutated: compare again on a change
        fresh = range_port is not self._last
        self._last = range_port
        return LazyColumns.all_at_once(SENSOR_FIELDS, lambda: self._columns(range_port, est, fresh))

    def _columns(self, range_port: Mapping[str, np.ndarray], est: Mapping[str, np.ndarray],
                 fresh: bool) -> dict[str, np.ndarray]:
        n = len(est["x"])
        gap = np.asarray(range_port["range_m"], float)
        if fresh:
            # the sensor sits on the front bumper; the target is ``range`` away at ``bearing`` from the heading
            heading = est["yaw"] + np.asarray(range_port.get("bearing_rad", np.full(n, np.nan)), float)
            target_x = est["x"] + self.sensor_offset * np.cos(est["yaw"]) + gap * np.cos(heading)
            target_y = est["y"] + self.sensor_offset * np.sin(est["yaw"]) + gap * np.sin(heading)
        else:
            target_x = target_y = np.full(n, np.nan)
        return {"gap_m": gap, "gap_rate_mps": np.asarray(range_port["range_rate_mps"], float),
                "target_x": target_x, "target_y": target_y}
