"""Stand-in modules for the length of one call: ``import x`` finds the double inside, the real package after.

A project module that imports a doubled package (``federates.ros2.node`` imports rclpy) is imported afresh inside
the swap, bound to the doubles, and kept with them for the next call, never left in ``sys.modules``: a later import
of the real thing (a test with the real service) finds the real package and the project module bound to it.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from collections.abc import Iterator, MutableMapping


@contextlib.contextmanager
def swapped(doubles: MutableMapping[str, types.ModuleType], bound: tuple[str, ...] = ()) -> Iterator[None]:
    """``doubles`` (module name -> module) in ``sys.modules`` for the block; ``bound``: project modules to import
    against them (their copies are added to ``doubles`` on the way out, and reused next time)."""
    names = [*doubles, *(name for name in bound if name not in doubles)]
    saved = {name: sys.modules.get(name) for name in names}
    parents = {name: _parent_attribute(name) for name in bound}
    for name in names:
        if name in doubles:
            sys.modules[name] = doubles[name]
        else:
            sys.modules.pop(name, None)  # imported afresh, against the doubles
        if name in bound:
            _set_parent_attribute(name, doubles.get(name))
    try:
        yield
    finally:
        for name in bound:
            if name not in doubles and name in sys.modules:
                doubles[name] = sys.modules[name]
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        for name, attribute in parents.items():
            _set_parent_attribute(name, attribute)


def _parent_attribute(name: str) -> types.ModuleType | None:
    """The submodule attribute ``from package import name`` would find first (None: not set)."""
    package, _, leaf = name.rpartition(".")
    return getattr(importlib.import_module(package), leaf, None) if package else None


def _set_parent_attribute(name: str, module: types.ModuleType | None) -> None:
    package, _, leaf = name.rpartition(".")
    if not package:
        return
    parent = importlib.import_module(package)
    if module is None:
        if hasattr(parent, leaf):
            delattr(parent, leaf)
    else:
        setattr(parent, leaf, module)
