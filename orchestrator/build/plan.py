"""The plan step: what only a built world can tell about a validated scenario, before anything runs: the run's
estimated memory against the budget, and where each robot starts (inside the local frame, no two bodies
overlapping when they appear). The scenario loader validates and never builds; ``coopsim validate``, ``coopsim run``
and the batch commands call ``check_plan`` on what it returns."""

from __future__ import annotations

from orchestrator.scenario import Scenario
from orchestrator.scenario.loader import located_error

from .resources import MemoryBudget, resource_problems
from .world import start_position_problems


def check_plan(scenario: Scenario, budget: MemoryBudget | None = None) -> None:
    """Raise ScenarioError (each problem at its field and line) when the run cannot be planned: more memory than
    ``budget`` (default: the memory available on this machine), or start poses that cannot run."""
    # placing the robots is skipped for a run too large to simulate anyway
    problems = resource_problems(scenario, budget or MemoryBudget()) or start_position_problems(scenario)
    if problems:
        raise located_error(scenario, problems)
