"""The project's import graph, read from the source: every import of every module, function-level ones included."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "orchestrator", "federates", "comms_models", "controllers")


def module_name(path: Path) -> str:
    """``orchestrator/metrics/roles.py`` -> ``orchestrator.metrics.roles`` (a package's ``__init__`` is the
    package)."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Every project module ``path`` imports, at any depth of the file (function-level imports included)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return {m for m in found if m.split(".")[0] in PACKAGES}


def source_files() -> dict[str, Path]:
    """Module name -> file, for every module of the project's packages."""
    return {module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}


def graph(with_packages: bool = False) -> dict[str, set[str]]:
    """Module -> the project modules it imports. ``with_packages``: also the packages above each imported module,
    whose ``__init__`` Python runs first (``import a.b.c`` runs ``a`` and ``a.b``), except the importer's own
    packages, which have run already when it runs."""
    modules = source_files()
    found = {name: {m for m in imports(path) if m in modules and m != name} for name, path in modules.items()}
    if not with_packages:
        return found
    return {name: ({p for d in deps for p in _packages_above(d)} & modules.keys() | deps) - _packages_above(name)
            - {name} for name, deps in found.items()}


def _packages_above(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:k]) for k in range(1, len(parts))}


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan), each sorted, every node in one: a component of more than one node
    is an import cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            visit(v)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: components of more than one module."""
    return [c for c in components(graph) if len(c) > 1]
