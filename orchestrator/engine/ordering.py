"""Which federate runs before which, and whether their ports fit: decided once, at setup, from the metas."""

from __future__ import annotations

import heapq

from core.federate import FederateMeta
from core.ports import ContractError, PortSpec, check_contract


class SchedulerError(ValueError):
    """The federates as declared cannot be scheduled (dependency cycle, two writers of one port ...)."""



def dependency_order(metas: dict[str, FederateMeta]) -> list[str]:
    """Order federate names so that each runs after the producers of its undelayed inputs.

    Kahn's algorithm, always taking the earliest-added ready federate, so independent federates keep insertion
    order. Raises ``SchedulerError`` naming the federates of a cycle that no delayed input breaks.
    """
    names = list(metas)
    producer: dict[str, str] = {}
    for name, meta in metas.items():
        for port in meta.output_names:
            if port in producer:
                raise SchedulerError(f"port '{port}' is written by both '{producer[port]}' and '{name}'")
            producer[port] = name
    edges: dict[str, set[str]] = {name: set() for name in names}
    indegree = dict.fromkeys(names, 0)
    for name, meta in metas.items():
        for inp in meta.inputs:
            src = producer.get(inp.port)
            if src is None or inp.delayed or src == name:
                continue
            if name not in edges[src]:
                edges[src].add(name)
                indegree[name] += 1
    order: list[str] = []
    ready = [i for i, n in enumerate(names) if indegree[n] == 0]
    heapq.heapify(ready)
    while ready:
        name = names[heapq.heappop(ready)]
        order.append(name)
        for nxt in edges[name]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(ready, names.index(nxt))
    if len(order) < len(names):
        stuck = [n for n in names if n not in order]
        # drop federates that merely wait for the cycle: repeatedly remove those no stuck federate waits for
        pruned = True
        while pruned:
            pruned = False
            for n in list(stuck):
                if not any(n in edges[m] for m in stuck if m != n) or not (edges[n] & set(stuck)):
                    stuck.remove(n)
                    pruned = True
        raise SchedulerError(
            "dependency cycle without a delayed input between federates "
            f"{', '.join(repr(n) for n in stuck)}; declare one of the inputs in the cycle as delayed"
        )
    return order


def check_contracts(metas: dict[str, FederateMeta]) -> dict[str, tuple[str, PortSpec]]:
    """Every input has a producer (unless optional) whose port offers the fields it reads with the same dtype and
    unit. Returns ``port -> (producer, spec)``. Raises ``ContractError`` naming both ends."""
    produced: dict[str, tuple[str, PortSpec]] = {}
    for name, meta in metas.items():
        for spec in meta.outputs:
            produced[spec.name] = (name, spec)  # type: ignore[union-attr]
    for name, meta in metas.items():
        for inp in meta.inputs:
            found = produced.get(inp.port)
            if found is None:
                if inp.optional:
                    continue
                offered = ", ".join(sorted(produced)) or "none"
                raise ContractError(f"input '{inp.port}' of federate '{name}' has no producer (ports produced: "
                                    f"{offered}); declare it optional if the federate can run without it")
            if inp.fields:
                check_contract(name, inp.fields, found[0], found[1])
    return produced
