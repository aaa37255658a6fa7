"""Scenario schema, loading with line-aware errors, and ``--set`` overrides."""

from .errors import Problem, ScenarioError
from .loader import apply_override, load_scenario, parse_scenario
from .model import Scenario

__all__ = ["Problem", "Scenario", "ScenarioError", "apply_override", "load_scenario", "parse_scenario"]
