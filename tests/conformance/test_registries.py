"""The registries ship the expected built-ins, and the check that says so notices a removed registration."""

from __future__ import annotations

import pytest

from .registries import FEDERATE_FACTORIES, FEDERATES_NEEDING_SERVICES, REGISTRIES, missing_builtins


@pytest.mark.parametrize("key", sorted(REGISTRIES))
def test_every_expected_builtin_is_registered(key: str) -> None:
    registry, expected = REGISTRIES[key]
    missing, unexpected = missing_builtins(registry, expected)
    assert missing == [], f"{key}: built-ins no longer registered: {missing}"
    assert unexpected == [], f"{key}: new built-ins {unexpected}: add them to tests/conformance/registries.py"


@pytest.mark.parametrize("key", sorted(REGISTRIES))
def test_a_removed_registration_is_noticed(key: str) -> None:
    registry, expected = REGISTRIES[key]
    copy = registry.copy()
    removed = expected[0]
    copy.unregister(removed)
    assert missing_builtins(copy, expected) == ([removed], [])
    assert removed not in copy.builtin_names()


@pytest.mark.parametrize("key", sorted(REGISTRIES))
def test_every_registry_reads_its_entry_point_group(key: str) -> None:
    registry, _ = REGISTRIES[key]
    assert registry.group == f"coopsim.{key}"


def test_every_federate_kind_is_either_built_here_or_says_what_it_needs() -> None:
    _, expected = REGISTRIES["federates"]
    assert sorted([*FEDERATE_FACTORIES, *FEDERATES_NEEDING_SERVICES]) == sorted(expected)
