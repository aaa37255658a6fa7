"""Between SUMO's network frame and coopsim's local frame, vectorised over vehicles.

- Position: SUMO's x, y are network coordinates, which netconvert shifted by the net's location offset
  (``<location netOffset=...>``, sumolib's ``net.getLocationOffset()``) from the coordinates it was given. coopsim
  removes that offset, then ``offset_m`` (where the local origin lies in those coordinates):
  ``local = sumo - netOffset - offset_m``. For a net built from plain XML (no projection, ``projParameter="!"``)
  with the default ``offset_m = 0``, the local frame is the frame of the plain node file.
- Heading: SUMO's angle is in degrees clockwise from north; REP-103 yaw is counter-clockwise from east:
  ``yaw = pi/2 - radians(angle)``, wrapped to (-pi, pi].
- Reference point: SUMO's position is the middle of the front bumper; coopsim's is the rear axle, which lies
  ``length - rear_overhang`` behind it along the heading.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class NetLocation:
    """The ``location`` element of a SUMO network."""

    net_offset: tuple[float, float]
    projection: str  # "!" when the net is not geo-referenced


def read_location(net: Path) -> NetLocation:
    """The net's location offset and projection, read from its ``location`` element (the first few lines)."""
    for _, elem in ET.iterparse(net, events=("start",)):
        if elem.tag == "location":
            dx, dy = (float(v) for v in elem.get("netOffset", "0,0").split(","))
            return NetLocation((dx, dy), elem.get("projParameter", "!"))
    raise ValueError(f"{net.name} has no <location> element: is it a SUMO network?")


def wrap(angle: np.ndarray) -> np.ndarray:
    """Angles wrapped to (-pi, pi]."""
    return np.arctan2(np.sin(angle), np.cos(angle))


@dataclass(frozen=True)
class Frame:
    """The translation from SUMO's network coordinates to the local frame (``local = sumo - shift``)."""

    shift: tuple[float, float]

    @classmethod
    def of(cls, location: NetLocation, offset_m: tuple[float, float]) -> Frame:
        """The frame of a net with this location, the local origin at ``offset_m`` in the un-shifted coordinates."""
        return cls((location.net_offset[0] + offset_m[0], location.net_offset[1] + offset_m[1]))

    def to_local(self, x: np.ndarray, y: np.ndarray, angle_deg: np.ndarray, length: np.ndarray,
                 rear_overhang: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """SUMO front-bumper positions and angles -> rear-axle ``x, y, yaw`` in the local frame."""
        yaw = wrap(np.pi / 2 - np.radians(angle_deg))
        back = length - rear_overhang
        return (x - self.shift[0] - back * np.cos(yaw), y - self.shift[1] - back * np.sin(yaw), yaw)

    def to_sumo(self, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, length: np.ndarray,
                rear_overhang: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rear-axle poses in the local frame -> SUMO front-bumper ``x, y`` and angle [deg, clockwise from north,
        in [0, 360)]."""
        ahead = length - rear_overhang
        angle = np.mod(90.0 - np.degrees(yaw), 360.0)
        return (x + ahead * np.cos(yaw) + self.shift[0], y + ahead * np.sin(yaw) + self.shift[1], angle)
