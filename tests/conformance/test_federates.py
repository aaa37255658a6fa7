"""Every federate kind declares typed ports at setup, and in a run writes values that conform to them. The bridges
to outside services are built on in-process doubles (``registries.FEDERATE_FACTORIES``); a kind that cannot be
is skipped with what it needs (``FEDERATES_NEEDING_SERVICES``, empty today)."""

from __future__ import annotations

import textwrap

import pytest

from federates import FEDERATE_KINDS
from orchestrator.build.world import build_world
from orchestrator.scenario import parse_scenario

from .checks import PortChecker, check_federate_meta
from .registries import FEDERATE_FACTORIES, FEDERATES_NEEDING_SERVICES

PLATOON = textwrap.dedent("""\
    version: 1
    name: conformance
    duration_s: 3
    vehicles: {count: 3, overrides: {robot2: {despawn_at_s: 2.0}}}
    controller: {type: ela_cacc}
    outputs: {trace: false, plots: false, report: false}
""")


def build(kind: str):
    """A federate of ``kind``: from the factory table, or by name alone (a plug-in kind)."""
    if kind in FEDERATES_NEEDING_SERVICES:
        pytest.skip(f"federate kind '{kind}' {FEDERATES_NEEDING_SERVICES[kind]}")
    factory = FEDERATE_FACTORIES.get(kind)
    if factory is not None:
        return factory(kind)
    try:
        return FEDERATE_KINDS.get(kind)(kind)
    except TypeError as exc:
        pytest.fail(f"federate kind '{kind}' cannot be built from its name alone ({exc}): add a factory to "
                    "tests/conformance/registries.py, or the service it needs to FEDERATES_NEEDING_SERVICES")


@pytest.mark.parametrize("kind", FEDERATE_KINDS.names())
def test_setup_declares_typed_ports(kind: str) -> None:
    federate = build(kind)
    try:
        meta = check_federate_meta(federate)
    finally:
        federate.finalize()
    if kind in FEDERATE_FACTORIES:  # the built-ins declare every output with its fields
        assert meta.outputs and all(spec.typed and spec.fields for spec in meta.outputs)


def test_the_built_in_federates_write_what_they_declare() -> None:
    scenario = parse_scenario(PLATOON, "conformance.yaml")
    world = build_world(scenario)
    checker = PortChecker()
    world.scheduler.run([checker])
    # physics, v2x and control all published, at their rates, through a despawn
    assert {"state", "estimate", "commands", "control_diag", "cam_rx", "range"} <= set(checker.checked)
    assert checker.checked["state"] == 301 and checker.checked["commands"] >= 150
