"""Prints the layer map of the project, drawn from its imports: ``python -m tests.tools.layers [--depth N]``.

Modules are grouped into units (a package and its sub-packages down to ``--depth`` dotted parts; loose modules
of a package form one unit with it). A unit's layer is one more than the highest layer of the units it imports
(units in a cycle share a layer and are marked), so layer 0 imports nothing of the project and every arrow points
down. Each line names the unit, its module count and the units it imports. An import counts the packages above
the imported module too: Python runs their ``__init__`` first.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from .imports import components, graph


def unit_of(module: str, units: set[str]) -> str:
    """The longest unit that is ``module`` or a package above it."""
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        candidate = ".".join(parts[:k])
        if candidate in units:
            return candidate
    return parts[0]


def units_of(modules: Mapping[str, set[str]], depth: int) -> dict[str, str]:
    """Module -> unit: the package path of the module cut to ``depth`` parts, where that path is a package."""
    packages = {m for m in modules if any(o.startswith(m + ".") for o in modules)}
    units = {".".join(m.split(".")[:depth]) for m in packages} | {m.split(".")[0] for m in modules}
    units = {u for u in units if u in packages or "." not in u}
    return {m: unit_of(m if m in packages else m.rpartition(".")[0] or m, units) for m in modules}


def layer_map(depth: int = 2) -> list[tuple[int, str, int, list[str], bool]]:
    """(layer, unit, modules, units it imports, in a cycle) for every unit, bottom layer first."""
    modules = graph(with_packages=True)
    unit = units_of(modules, depth)
    edges: dict[str, set[str]] = {u: set() for u in unit.values()}
    for module, deps in modules.items():
        edges[unit[module]].update(unit[d] for d in deps if unit[d] != unit[module])
    layer: dict[str, int] = {}
    cyclic: set[str] = set()
    for component in components(edges):  # Tarjan returns components in reverse topological order: leaves first
        if len(component) > 1:
            cyclic.update(component)
        below = [layer[d] for u in component for d in edges[u] if d not in component]
        for u in component:
            layer[u] = max(below, default=-1) + 1
    size = {u: sum(1 for m in unit if unit[m] == u) for u in edges}
    return sorted((layer[u], u, size[u], sorted(edges[u]), u in cyclic) for u in edges)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.tools.layers", description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=2, help="dotted parts a unit keeps (default 2)")
    args = parser.parse_args(argv)
    current = -1
    for level, name, count, deps, cyclic in layer_map(args.depth):
        if level != current:
            print(f"layer {level}")
            current = level
        mark = "  (in an import cycle)" if cyclic else ""
        print(f"  {name} [{count}]{mark}" + (f" -> {', '.join(deps)}" if deps else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
