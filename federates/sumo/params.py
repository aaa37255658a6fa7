"""Parameters of the SUMO federate (``type: sumo``) and the rule for the files a scenario names.

Relative file names are resolved against the scenario file's directory and must stay inside it (a symlink or
``..`` that leads out is refused); an absolute name is accepted only with ``allow_absolute_paths: true``. Only
network and route files are read, and every SUMO option coopsim passes is fixed here (``backend.sumo_options``),
so a scenario cannot make SUMO write files anywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from core.scenario_dir import current_scenario_dir

MAX_ROBOT_ID = 2**32 - 1
"""Robot ids are station ids: 32-bit."""


class LaneChange(BaseModel):
    """A lane change SUMO is told to make (``vehicle.changeLane``): vehicle ``vehicle`` moves to lane ``lane`` of
    its edge from ``t_s`` on; the request holds for ``duration_s``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    vehicle: str = Field(min_length=1, description="SUMO id of one of SUMO's own vehicles (from the route files)")
    t_s: float = Field(ge=0, description="[s] when SUMO is told: a multiple of period_s")
    lane: int = Field(ge=0, le=255, description="target lane index on the vehicle's edge (0: the rightmost)")
    duration_s: float = Field(5.0, gt=0, le=3600, description="[s] how long the request holds: with the sublane "
                              "model the move takes lane width / maxSpeedLat, so leave it time to finish")
    mode: int | None = Field(None, ge=0, le=4095, description="SUMO's lane change mode for the vehicle from t_s on "
                             "(TraCI setLaneChangeMode, a bitset; bits 9-8 say how the request treats the gaps of "
                             "others: 0 not at all, 1 avoid immediate collisions, 2 respect safe gaps (SUMO's default "
                             "mode 1621); default: leave the vehicle's mode as it is")

    @field_validator("vehicle")
    @classmethod
    def _not_a_robot(cls, value: str) -> str:
        if value.startswith("coopsim."):
            raise ValueError(f"'{value}' is a coopsim robot in SUMO; name one of SUMO's own vehicles")
        return value


class SumoParams(BaseModel):
    """``params`` of a ``type: sumo`` federate."""

    model_config = ConfigDict(extra="forbid")

    # first, so that the file fields are checked knowing it
    allow_absolute_paths: bool = Field(False, description="accept absolute file names (outside the scenario's "
                                       "directory)")
    net: str = Field(description="SUMO network (.net.xml), relative to the scenario file")
    routes: list[str] = Field(default_factory=list, description="route files (.rou.xml: vTypes, routes, flows)")
    backend: Literal["libsumo", "traci"] = Field(
        "libsumo", description="libsumo: SUMO inside this process; traci: a headless sumo process over TraCI")
    period_s: float = Field(0.1, gt=0, description="SUMO's step length [s]: a multiple of the scenario's step_s")
    id_base: int = Field(1_000_000, ge=1, le=MAX_ROBOT_ID,
                         description="robot id of the first SUMO vehicle; the next ones count up in departure order")
    offset_m: tuple[float, float] = Field((0.0, 0.0), description="[m] where the local origin lies in the network's "
                                          "own coordinates (the net's location offset already removed)")
    mirror: bool = Field(True, description="put coopsim's own robots into SUMO every step, so its traffic reacts "
                         "to them")
    rear_overhang_share: float = Field(0.2, ge=0, lt=1, description="rear overhang of a SUMO vehicle as a share of "
                                       "its length (SUMO has none): where its rear axle lies")
    collision_action: Literal["warn", "none"] = Field(
        "warn", description="what SUMO does on a collision (coopsim's physics counts contacts itself); vehicles are "
        "never removed or teleported, so a robot does not jump")
    drive_route: str | None = Field(None, description="route (of the route files) along which SUMO drives the "
                                    "robots the scenario gives to this federate (driver: {federate: <name>})")
    drive_type: str | None = Field(None, description="vehicle type (of the route files) of those robots' SUMO "
                                   "twins: their desired speed and car-following (default: SUMO's default type)")
    fcd_output: bool = Field(False, description="SUMO writes its floating car data to <run dir>/<name>.fcd.xml")
    lateral_resolution_m: float | None = Field(
        None, gt=0, le=100, allow_inf_nan=False, description="[m] SUMO's sublane model (--lateral-resolution): "
        "lane changes take several steps at the vType's maxSpeedLat instead of one (default: off, one-step changes)")
    lane_changes: list[LaneChange] = Field(default_factory=list, description="lane changes SUMO's vehicles are "
                                           "told to make at given times (e.g. a cut-in)")

    @field_validator("period_s")
    @classmethod
    def _whole_milliseconds(cls, value: float) -> float:
        if abs(value * 1000 - round(value * 1000)) > 1e-9:
            raise ValueError(f"SUMO counts time in milliseconds: period_s must be a whole number of ms, got {value}")
        return value

    @field_validator("lane_changes")
    @classmethod
    def _on_sumo_steps(cls, value: list[LaneChange], info: ValidationInfo) -> list[LaneChange]:
        period = info.data.get("period_s")
        if period is None:
            return value  # period_s itself was refused
        for k, change in enumerate(value):
            steps = change.t_s / period
            if abs(steps - round(steps)) > 1e-9:
                raise ValueError(f"lane_changes[{k}].t_s must be a multiple of period_s ({period} s), got "
                                 f"{change.t_s}")
        return value

    @field_validator("net")
    @classmethod
    def _net_exists(cls, value: str, info: ValidationInfo) -> str:
        """Checked where the scenario is validated (its directory is known then)."""
        path = resolve_input(value, "net", current_scenario_dir(), bool(info.data.get("allow_absolute_paths")))
        from .frames import read_location

        read_location(path)  # a SUMO network: refused here rather than when SUMO starts
        return value

    @field_validator("routes")
    @classmethod
    def _routes_exist(cls, value: list[str], info: ValidationInfo) -> list[str]:
        for k, name in enumerate(value):
            path = resolve_input(name, f"routes[{k}]", current_scenario_dir(),
                                 bool(info.data.get("allow_absolute_paths")))
            _check_root(path, "routes")
        return value


class FileRefusedError(ValueError):
    """A file name the scenario may not use, or that does not exist."""


def resolve_input(name: str, field: str, base: Path | None, allow_absolute: bool) -> Path:
    """The file ``name`` of field ``field``: relative to ``base`` (the scenario's directory; None: the working
    directory) and inside it, or absolute when allowed; it must be a readable file."""
    root = (base or Path.cwd()).resolve()
    given = Path(name)
    if given.is_absolute():
        if not allow_absolute:
            raise FileRefusedError(f"'{name}' is an absolute path; name it relative to the scenario file or set "
                              "allow_absolute_paths: true")
        path = given.resolve()
    else:
        path = (root / given).resolve()
        if not path.is_relative_to(root):
            raise FileRefusedError(f"{field} '{name}' lies outside the scenario's directory {root}")
    if not path.is_file():
        raise FileRefusedError(f"no {field} file '{name}' (looked for {path})")
    return path


def _check_root(path: Path, tag: str) -> None:
    """The file is XML whose root element is ``tag`` (only the start is read: route files can be large)."""
    import xml.etree.ElementTree as ET

    try:
        for _, elem in ET.iterparse(path, events=("start",)):
            if elem.tag != tag:
                raise FileRefusedError(f"{path.name} is not a SUMO {tag} file: its root element is <{elem.tag}>")
            return
    except ET.ParseError as exc:
        raise FileRefusedError(f"{path.name} is not XML: {exc}") from None
