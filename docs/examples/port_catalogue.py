"""Print the port catalogue of docs/extending.md: every built-in port (``core.ports.BUILTIN_PORTS``)
with its fields, and the built-in federates that produce and consume it (from their ``setup`` declarations).

    python docs/examples/port_catalogue.py      # the Markdown between the catalogue markers of docs/extending.md
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from core.federate import FederateMeta, SetupContext
from core.ports import BUILTIN_PORTS, FieldSpec
from federates import FEDERATE_KINDS
from federates.physics.config import PhysicsConfig
from orchestrator.scenario.maneuvers_block import ManeuverSettings

STEP_NS = 10_000_000


def builtin_metas() -> dict[str, FederateMeta]:
    """What the physics, v2x and control federates declare at setup (v2x with an ITS-G5 channel and a run
    directory, as in a recorded run, and both as in a scenario with maneuvers: every port)."""
    no_maneuvers = {"requests": [], "settings": ManeuverSettings().model_dump(), "paths": [], "lanes": {},
                    "blocks": {}}
    federates = {
        "physics": FEDERATE_KINDS.get("physics")("physics", STEP_NS, PhysicsConfig()),
        "v2x": FEDERATE_KINDS.get("v2x")("v2x", STEP_NS, {"type": "itsg5"}, maneuvers=True),
        "control": FEDERATE_KINDS.get("control")("control", 2 * STEP_NS, maneuvers=no_maneuvers),
    }
    metas = {}
    with tempfile.TemporaryDirectory() as out_dir:
        for name, federate in federates.items():
            metas[name] = federate.setup(SetupContext(seed=0, end_ns=STEP_NS, out_dir=Path(out_dir)))
            federate.finalize()
    return metas


def _dtype(field: FieldSpec) -> str:
    """The dtype column: codes name their categories (what the recorded file holds as strings)."""
    return f"{field.dtype} codes of {', '.join(field.categories)}" if field.categories else field.dtype


def catalogue() -> str:
    """The Markdown catalogue: one table per port."""
    metas = builtin_metas()
    lines = []
    for spec in BUILTIN_PORTS:
        producers = [name for name, meta in metas.items() if spec.name in meta.output_names]
        consumers = [name for name, meta in metas.items() if any(i.port == spec.name for i in meta.inputs)]
        index = "one row per live robot, with an `id` column (int64)" if spec.index == "robot" else \
            "an event table (any number of rows)"
        lines += [f"### `{spec.name}`", "",
                  f"{spec.doc[:1].upper() + spec.doc[1:]}. Indexed by {spec.index}: {index}. "
                  f"Produced by {', '.join(producers) or 'nothing built in'}; "
                  f"read by {', '.join(consumers) or 'the recorder only'}.", "",
                  "| field | dtype | unit |", "|---|---|---|"]
        lines += [f"| `{f.name}` | {_dtype(f)} | {f.unit} |" for f in spec.fields]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(catalogue(), end="")
