"""Between SUMO's network frame and coopsim's local frame, vectorised over vehicles.

- Position: SUMO's x, y are network coordinates, which netconvert shifted by the net's location offset
  (``<location netOffset=...>``, sumolib's ``net.getLocationOffset()``) from the coordinates it was given. coopsim
  removes that offset, then ``offset_m`` (where the local origin lies in those coordinates):
  ``local = sumo - netOffset - offset_m``. For a net built from plain XML (no projection, ``projParameter="!"``)
  with the default ``offset_m = 0``, the local frame is the frame of the plain node file.
- Heading: SUMO's angle is in degrees clockwise from north; REP-103 yaw is counter-clockwise from east:
  ``yaw = pi/2 - radians(angle)``, wrapped to (-pi, pi].
- Geo-referenced nets (UTM): ``sumo - netOffset`` is a UTM position, which goes to WGS84 and on to the
  scenario's local tangent plane at its ``origin`` (``comms_models.itsg5.geo``: the frame CAM positions are
  encoded in), headings with the meridian convergence; ``offset_m`` does not apply.
- Reference point: SUMO's position is the middle of the front bumper; coopsim's is the rear axle, which lies
  ``length - rear_overhang`` behind it along the heading.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from comms_models.itsg5.geo import LocalProjection

from .projection import Utm


@dataclass(frozen=True)
class NetLocation:
    """The ``location`` element of a SUMO network."""

    net_offset: tuple[float, float]
    projection: str  # "!" when the net is not geo-referenced


def read_location(net: Path) -> NetLocation:
    """The net's location offset and projection, read from its ``location`` element (the first few lines)."""
    try:
        for _, elem in ET.iterparse(net, events=("start",)):
            if elem.tag == "location":
                dx, dy = (float(v) for v in elem.get("netOffset", "0,0").split(","))
                return NetLocation((dx, dy), elem.get("projParameter", "!"))
    except ET.ParseError as exc:
        raise ValueError(f"{net.name} is not XML: {exc}") from None
    raise ValueError(f"{net.name} has no <location> element: is it a SUMO network?")


def wrap(angle: np.ndarray) -> np.ndarray:
    """Angles wrapped to (-pi, pi]."""
    return np.arctan2(np.sin(angle), np.cos(angle))


class Frame:
    """From SUMO's network coordinates to the local frame and back.

    Plain nets: ``local = sumo - shift``. Geo-referenced (UTM) nets: ``sumo - netOffset`` is a UTM position, taken
    to WGS84 and from there to the scenario's local tangent plane at its origin (the frame the V2X federate
    encodes CAM positions in); headings go through a 1 m probe point, so the meridian convergence is included."""

    def __init__(self, shift: tuple[float, float], utm: Utm | None = None,
                 local: LocalProjection | None = None) -> None:
        self.shift = shift
        self.utm = utm
        self.local = local

    @classmethod
    def of(cls, location: NetLocation, offset_m: tuple[float, float],
           origin: tuple[float, float] | None = None) -> Frame:
        """The frame of a net with this location: the local origin at ``offset_m`` in the un-shifted coordinates
        of a plain net, or at the scenario's WGS84 ``origin`` (lat, lon) for a geo-referenced one."""
        if location.projection == "!":
            return cls((location.net_offset[0] + offset_m[0], location.net_offset[1] + offset_m[1]))
        if offset_m != (0.0, 0.0):
            raise ValueError("offset_m is for nets without a projection: a geo-referenced net is placed by the "
                             "scenario's origin")
        if origin is None:
            raise ValueError("a geo-referenced net needs the scenario's origin (lat, lon)")
        return cls(location.net_offset, Utm.parse(location.projection), LocalProjection(*origin))

    def points_to_local(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """SUMO positions -> local x, y."""
        if self.utm is None or self.local is None:
            return x - self.shift[0], y - self.shift[1]
        lat, lon = self.utm.inverse(x - self.shift[0], y - self.shift[1])
        return self.local.to_local(lat, lon)

    def points_to_sumo(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Local x, y -> SUMO positions."""
        if self.utm is None or self.local is None:
            return x + self.shift[0], y + self.shift[1]
        east, north = self.utm.forward(*self.local.to_geodetic(x, y))
        return east + self.shift[0], north + self.shift[1]

    def to_local(self, x: np.ndarray, y: np.ndarray, angle_deg: np.ndarray, length: np.ndarray,
                 rear_overhang: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """SUMO front-bumper positions and angles -> rear-axle ``x, y, yaw`` in the local frame."""
        fx, fy = self.points_to_local(x, y)
        if self.utm is None:
            yaw = wrap(np.pi / 2 - np.radians(angle_deg))
        else:  # grid north is not true north away from the central meridian: turn by the convergence
            heading = np.radians(angle_deg)
            px, py = self.points_to_local(x + np.sin(heading), y + np.cos(heading))
            yaw = np.arctan2(py - fy, px - fx)
        back = length - rear_overhang
        return fx - back * np.cos(yaw), fy - back * np.sin(yaw), yaw

    def to_sumo(self, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, length: np.ndarray,
                rear_overhang: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rear-axle poses in the local frame -> SUMO front-bumper ``x, y`` and angle [deg, clockwise from north,
        in [0, 360)]."""
        ahead = length - rear_overhang
        fx, fy = x + ahead * np.cos(yaw), y + ahead * np.sin(yaw)
        sx, sy = self.points_to_sumo(fx, fy)
        if self.utm is None:
            angle = np.mod(90.0 - np.degrees(yaw), 360.0)
        else:
            px, py = self.points_to_sumo(fx + np.cos(yaw), fy + np.sin(yaw))
            angle = np.mod(np.degrees(np.arctan2(px - sx, py - sy)), 360.0)
        return sx, sy, angle
