"""Every name table is a registry (``core.registry.Registry``): no module-level dict of named implementations
(classes, functions, ``module:Class`` paths) and no dict keyed like a registry's built-ins sits beside them.

A table that must stay a dict is named in ``ALLOWED`` with the reason; an entry that no longer matches leaves it.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from core.registry import Registry, is_plugin_path

from .tools.imports import PACKAGES, REPO, module_name

ALLOWED: dict[str, str] = {
    "controllers.prediction:PREDICTORS": "a closed set fixed by the scenario schema (controller.predict is "
                                         "Literal['none', 'ctrv']): not an extension point",
    "orchestrator.reporting.plots:DRAWERS": "the plot worker's allow-list: it draws these functions and never a "
                                            "plug-in's (plot_worker.py)",
    "orchestrator.reporting.v2x_plots:DRAWERS": "the V2X part of the plot worker's allow-list",
    "orchestrator.metrics.registry:_ELSEWHERE": "feeds METRICS: the built-ins that live outside the default module",
    "orchestrator.batch.compare:STORY": "the demo story's variants: sets of --set overrides (data), named like the "
                                        "channels they select",
    "orchestrator.batch.compare_plots:CHANNEL_COLORS": "styling of the comparison page per channel kind (data); other "
                                                       "variants take the rest of the palette",
    "orchestrator.batch.compare_plots:MARKERS": "the comparison page's marker per channel kind (data), as above",
}
"""``module:NAME`` -> why this module-level dict stays a dict."""

MIN_SHARED_KEYS = 2
"""A dict sharing this many keys with one registry's built-in names is a parallel table of it."""


def _defined(tree: ast.Module) -> set[str]:
    """Classes and functions the module defines at top level."""
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef | ast.FunctionDef)}


def _is_implementation(value: ast.expr, defined: set[str]) -> bool:
    """A class (CapWords, or defined here), a function defined here, a lambda or a ``module:Class`` string."""
    if isinstance(value, ast.Constant):
        return isinstance(value.value, str) and is_plugin_path(value.value)
    if isinstance(value, ast.Lambda):
        return True
    name = value.id if isinstance(value, ast.Name) else value.attr if isinstance(value, ast.Attribute) else None
    if name is None:
        return False
    return name in defined or (name[0].isupper() and not name.isupper())


def name_tables(source: str) -> dict[str, tuple[list[str], bool]]:
    """Module-level dict literals with string keys: ``NAME -> (keys, whether every value is an implementation)``."""
    tree = ast.parse(source)
    defined = _defined(tree)
    found: dict[str, tuple[list[str], bool]] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target if isinstance(
            node, ast.AnnAssign) else None
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if not isinstance(target, ast.Name) or not isinstance(value, ast.Dict) or not value.keys:
            continue
        keys = [k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        if len(keys) == len(value.keys):
            found[target.id] = (keys, all(_is_implementation(v, defined) for v in value.values))
    return found


def registries() -> dict[str, Registry]:
    """Every module-level ``Registry`` of the packages, by ``module:NAME``."""
    found = {}
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Name) and node.value.func.id == "Registry"):
                module = importlib.import_module(module_name(path))
                for target in node.targets:
                    found[f"{module.__name__}:{target.id}"] = getattr(module, target.id)
    return found


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


def offenders(tables: dict[str, tuple[list[str], bool]], builtins: dict[str, set[str]]) -> dict[str, str]:
    """``module:NAME`` -> what makes it a name table: implementations by name, or keys of a registry."""
    out = {}
    for where, (keys, implementations) in tables.items():
        if implementations:
            out[where] = "maps names to implementations"
            continue
        for registry, names in builtins.items():
            if len(names & set(keys)) >= MIN_SHARED_KEYS:
                out[where] = f"is keyed like {registry}"
    return out


def test_no_name_table_beside_the_registries() -> None:
    found = registries()
    assert len(found) >= 8, sorted(found)  # the scan sees the registries it compares against
    builtins = {where: set(registry.builtin_names()) for where, registry in found.items()}
    tables = {f"{module_name(path)}:{name}": entry for path in _sources()
              for name, entry in name_tables(path.read_text(encoding="utf-8")).items()}
    bad = offenders(tables, builtins)
    assert set(bad) - set(ALLOWED) == set(), {k: v for k, v in bad.items() if k not in ALLOWED}
    assert set(ALLOWED) - set(bad) == set(), "allowed but no longer a name table: take it off ALLOWED"


def test_the_scan_sees_classes_paths_functions_and_parallel_tables() -> None:
    source = '''
from .models import Fiala, TYRE_LINEAR

def predict_none(sample): return sample

MODELS = {"fiala": Fiala, "linear": "pkg.models:Linear"}
PREDICT: dict = {"none": predict_none, "last": lambda s: s}
CODES = {"fiala": TYRE_LINEAR, "linear": TYRE_LINEAR}
LIMITS = {"speed": (0.0, 1.0), "steer": "rad"}
'''
    tables = {f"m:{name}": entry for name, entry in name_tables(source).items()}
    bad = offenders(tables, {"tyres": {"fiala", "linear", "pacejka"}})
    assert bad == {"m:MODELS": "maps names to implementations", "m:PREDICT": "maps names to implementations",
                   "m:CODES": "is keyed like tyres"}
