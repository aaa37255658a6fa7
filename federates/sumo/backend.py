"""Starting SUMO headless, in process (libsumo) or as a process over TraCI, with a fixed set of options.

Every option is written here: the scenario chooses the files (checked by ``params.resolve_input``), the step
length, the seed, the sublane model's lateral resolution and whether SUMO writes its floating car data into the
run directory; nothing else reaches
SUMO's command line. Both backends offer the same domain API (``vehicle``, ``simulation``, ``route``,
``vehicletype``), so the federate never knows which one it drives.
"""

from __future__ import annotations

import contextlib
import io
import itertools
from pathlib import Path
from typing import Any

_LABELS = itertools.count()


def sumo_options(net: Path, routes: list[Path], step_s: float, seed: int, collision_action: str,
                 fcd: Path | None, lateral_resolution_m: float | None = None) -> list[str]:
    """SUMO's command line arguments (without the binary): files, timing, seed and the fixed behaviour.

    Fixed: no teleports of jammed vehicles (``--time-to-teleport -1``: a robot must never jump), collisions only
    reported (coopsim's physics counts contacts), no step log, warnings off, a fixed random seed.
    ``lateral_resolution_m`` turns on SUMO's sublane model: lanes are split into sublanes of that width and a lane
    change moves the vehicle sideways at its vType's ``maxSpeedLat`` over several steps ("Simulation/SublaneModel"
    in SUMO's documentation); without it a lane change takes one step."""
    args = ["--net-file", str(net), "--step-length", f"{step_s:.3f}", "--begin", "0", "--seed", str(int(seed)),
            "--time-to-teleport", "-1", "--collision.action", collision_action, "--no-step-log", "true",
            "--no-warnings", "true", "--duration-log.disable", "true", "--xml-validation", "never"]
    if routes:
        args += ["--route-files", ",".join(str(p) for p in routes)]
    if lateral_resolution_m is not None:
        args += ["--lateral-resolution", repr(float(lateral_resolution_m))]
    if fcd is not None:
        args += ["--fcd-output", str(fcd), "--precision", "6"]
    return args


def start(backend: str, args: list[str]) -> Any:
    """A running SUMO: the ``libsumo`` module (started) or a TraCI connection to a ``sumo`` process."""
    if backend == "libsumo":
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # it prints a pyarrow version note on import
                import libsumo
        except ImportError:
            raise RuntimeError("the SUMO federate needs libsumo: pip install 'coopsim[sumo]'") from None
        if libsumo.simulation.isLoaded():
            raise RuntimeError("libsumo runs one SUMO per process and one is already running; use backend: traci "
                               "for a second SUMO federate")
        libsumo.start(["sumo", *args])
        return libsumo
    try:
        import sumo
        import traci
    except ImportError:
        raise RuntimeError("the SUMO federate needs traci and eclipse-sumo: pip install 'coopsim[sumo]'") from None
    binary = str(Path(sumo.SUMO_HOME) / "bin" / "sumo")
    label = f"coopsim-{next(_LABELS)}"
    traci.start([binary, *args], label=label, stdout=None)
    return traci.getConnection(label)


def stop(connection: Any) -> None:
    """Close SUMO (libsumo: in process; TraCI: ends the sumo process and waits for it)."""
    connection.close()
