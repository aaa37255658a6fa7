"""What a run will need before it runs: an estimate of its memory and disk, held to a budget (``coopsim run
--memory-budget-gb``, ``--force``) when a scenario is loaded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.recording.limits import PASS_BUDGET_BYTES, PLOT_POINTS, SERIES_COLUMNS

if TYPE_CHECKING:
    from orchestrator.scenario.model import Loc, Scenario


@dataclass(frozen=True)
class MemoryBudget:
    """How much memory a run may need: ``gb`` (None: the machine's available memory), or no limit (``force``)."""

    gb: float | None = None
    force: bool = False


# Peak memory does not grow with the length of a run: the recorders hold at most a few row groups, and metrics,
# plots and the digest stream over the traces (a bounded pass of whole platoons, thinned plot series); only the
# V2X trace is read whole. Checked with bench/bench_soak.py (100 robots over ITS-G5, 150 s: 875 MB measured
# against 872 MB estimated). The interpreter and libraries take ~350 MB.
_BASE_BYTES = 400e6
_BYTES_PER_ROBOT = 50e3  # the robot's state, station and controller rows, with allocator overhead
_RECORDER_ROWS = 3 * 262_144  # row groups the vehicle recorder holds at most (one filling, two being written)
_V2X_COLUMNS = 8
_V2X_BYTES_PER_CELL = 8 * 1.5  # read whole for the link metrics, with their index
_DISK_BYTES_PER_VEHICLE_ROW = 80.0  # Parquet, compressed: vehicles plus the range and other robot ports
_DISK_BYTES_PER_V2X_ROW = 10.0
_PCAP_BYTES_PER_FRAME = 400.0


@dataclass(frozen=True)
class ResourceEstimate:
    """What a run will need, roughly (an upper estimate with every robot present for the whole run)."""

    robots: int
    steps: int
    trace_samples: int
    trace_columns: int
    v2x_rows: int
    memory_bytes: float
    disk_bytes: float

    def describe(self) -> str:
        """'about 12.3 GB of memory and 400 MB of disk (4,001 trace samples x 100 robots x 25 columns, ...)'."""
        v2x = f", plus {self.v2x_rows:,} V2X trace rows" if self.v2x_rows else ""
        return (f"about {_size(self.memory_bytes)} of memory and {_size(self.disk_bytes)} of disk "
                f"({self.trace_samples:,} trace samples x {self.robots:,} robots x {self.trace_columns} columns"
                f"{v2x}; {self.steps:,} steps)")


def _size(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e9 else f"{n_bytes / 1e6:.0f} MB"


def robot_count(scenario: Scenario) -> int:
    """How many robots the scenario has, in either form (without building them)."""
    block = scenario.vehicles
    if block is None:
        return sum(len(p.members) if p.members is not None else p.count or 0 for p in scenario.platoons)
    return len(block) if isinstance(block, list) else block.count


def estimate_resources(scenario: Scenario) -> ResourceEstimate:
    """Memory and disk of a run from its size: steps x robots x trace columns, and the V2X trace rows (ideal: a
    sent and a received row per robot and step; ITS-G5: a sent row and one per reader of each CAM)."""
    from orchestrator.recording.recorder import COLUMNS

    robots = robot_count(scenario)
    duration, step = scenario.duration_s, scenario.step_s
    steps = int(duration / step) + 1
    traced = scenario.outputs.trace
    samples = int(duration / (scenario.outputs.trace_period_s or step)) + 1 if traced else 0
    columns = len(COLUMNS) + 3  # the recorded ports' columns, time, robot and platoon
    v2x_rows, pcap_frames = 0, 0
    channel = scenario.channel.model_dump()
    if traced and channel["type"] == "ideal":
        v2x_rows = 2 * robots * steps
    elif traced and channel["type"] == "itsg5":
        from comms_models.itsg5.params import ItsG5Params

        try:
            params = ItsG5Params.model_validate({k: v for k, v in channel.items() if k != "type"})
        except ValueError:  # the loader reports it at its line; estimate with the defaults meanwhile
            params = ItsG5Params()
        generation = params.generation
        rate = generation.fixed_rate_hz if generation.mode == "fixed_rate" else 1.0 / generation.t_gen_cam_min_s
        readers = robots - 1 if params.trace == "all" else 2  # 'interest': predecessor's and leader's
        cams = int(robots * duration * rate)
        v2x_rows = cams * (1 + max(readers, 0))
        pcap_frames = min(cams, params.pcap_max_frames) if params.pcap else 0
    rows = samples * robots
    recording = min(rows, _RECORDER_ROWS) * columns * 8
    metrics = min(rows * len(SERIES_COLUMNS) * 8, PASS_BUDGET_BYTES) * 2  # a pass and the views built on it
    plots = robots * min(samples, PLOT_POINTS) * 8 * 8
    memory = (_BASE_BYTES + robots * _BYTES_PER_ROBOT + recording + metrics + plots
              + v2x_rows * _V2X_COLUMNS * _V2X_BYTES_PER_CELL)
    disk = (rows * _DISK_BYTES_PER_VEHICLE_ROW + v2x_rows * _DISK_BYTES_PER_V2X_ROW
            + pcap_frames * _PCAP_BYTES_PER_FRAME)
    return ResourceEstimate(robots, steps, samples, columns if traced else 0, v2x_rows, memory, disk)


def available_memory_bytes() -> float | None:
    """``MemAvailable`` of /proc/meminfo (None where there is none)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def resource_problems(scenario: Scenario, budget: MemoryBudget) -> list[tuple[Loc, str, Any]]:
    """A run whose estimated memory exceeds ``budget``, reported at the fleet's size."""
    if budget.force:
        return []
    if budget.gb is not None:
        limit, what = budget.gb * 1e9, "--memory-budget-gb"
    else:
        available = available_memory_bytes()
        if available is None:
            return []
        limit, what = available, "the memory available on this machine"
    estimate = estimate_resources(scenario)
    if estimate.memory_bytes <= limit:
        return []
    loc: Loc = ("platoons",) if scenario.vehicles is None else ("vehicles",) if isinstance(scenario.vehicles, list) \
        else ("vehicles", "count")
    return [(loc, f"the run would need {estimate.describe()}, more than the budget of {_size(limit)} "
                  f"({what}); use fewer robots, a shorter duration_s, a longer outputs.trace_period_s or "
                  f"outputs.trace: false, or run it with 'coopsim run --force' (or --memory-budget-gb)",
             estimate.robots)]


