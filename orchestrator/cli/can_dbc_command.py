"""``coopsim can-dbc SCENARIO``: the DBC of a scenario's CAN bus, every robot's frames at their real ids.

The shipped ``coopsim.dbc`` defines each message at slot 0 for tools that apply the id mask 0x700; stock DBC tools
do not, and decode no frame of a run. This writes the DBC for the robots the scenario puts on its CAN bridge
(``federates/can/robots_dbc.py``), to stdout or ``-o FILE``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def add_can_dbc_parser(sub: Any) -> None:
    """The ``can-dbc`` subcommand."""
    p = sub.add_parser("can-dbc", help="write the DBC of a scenario's CAN bus: every robot's frames at their real "
                                       "arbitration ids, for stock DBC tools")
    p.add_argument("scenario", type=Path, help="scenario YAML file with a 'type: can' federate")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE",
                   help="override a field, as for 'coopsim run' (repeatable)")
    p.add_argument("--federate", metavar="NAME", help="the CAN bridge to describe, when the scenario has several")
    p.add_argument("-o", "--out", type=Path, metavar="FILE", help="write the DBC here (default: stdout)")


def run_can_dbc_command(args: argparse.Namespace) -> int:
    """Validate the scenario, pick its CAN bridge and write the DBC; a scenario without one is bad input."""
    from federates.can.params import CanParams
    from federates.can.robots_dbc import BusRobot, robots_dbc
    from orchestrator.build.world import expand_robots
    from orchestrator.scenario import load_scenario

    scenario = load_scenario(args.scenario, args.overrides)
    bridges = [f for f in scenario.federates if _is_can_bridge(f.type)]
    if args.federate is not None:
        bridges = [f for f in bridges if f.name == args.federate]
    if len(bridges) != 1:
        names = ", ".join(f.name for f in scenario.federates if _is_can_bridge(f.type)) or "none"
        what = (f"--federate: no CAN bridge named '{args.federate}'" if args.federate is not None and not bridges
                else "federates: no entry of type 'can'" if not bridges
                else "federates: several CAN bridges; choose one with --federate")
        print(f"error: {args.scenario}: {what} (CAN bridges: {names})", file=sys.stderr)
        return EXIT_BAD_INPUT
    bridge = bridges[0]
    period_s = CanParams(**bridge.params).period_s
    robots = [BusRobot(r.id, r.name, r.driven_by(bridge.name))
              for r in expand_robots(scenario)]
    try:
        text = robots_dbc(robots, period_s)
    except ValueError as exc:
        print(f"error: {args.scenario}: vehicles: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return EXIT_OK
    try:
        args.out.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"error: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    driven = sum(r.driven for r in robots)
    print(f"wrote {args.out}: {len(robots)} robots on '{bridge.name}' ({driven} commanded), "
          f"{2 * len(robots) + driven} messages", file=sys.stderr)
    return EXIT_OK


def _is_can_bridge(kind: str) -> bool:
    """``type: can``, or a path or entry point that names the bridge class (or a subclass)."""
    if kind == "can":
        return True
    from federates import FEDERATE_KINDS
    from federates.can import CanBridge

    try:
        cls = FEDERATE_KINDS.get(kind)
    except Exception:  # validated already; a remote-only kind need not import here
        return False
    return isinstance(cls, type) and issubclass(cls, CanBridge)
