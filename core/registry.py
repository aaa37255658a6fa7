"""Name -> class registries, as python-can keeps its bus backends.

Three sources, looked up in this order:

1. the built-in table (``name -> "package.module:Attribute"``), imported on first use, so a missing optional
   dependency only breaks its own entry;
2. installed distributions' entry points in the registry's group (``coopsim.controllers`` ...), imported only when
   selected;
3. a ``package.module:Attribute`` path written in the scenario (a plug-in that is not installed as a distribution).

A registry may name a ``base`` class: whatever it returns is a subclass of it, checked before anything is called.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

_ENTRY_POINTS: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}


def _installed_entry_points(group: str) -> dict[str, Any]:
    """The installed distributions' entry points of ``group``, scanned once per process and ``sys.path``: the scan
    reads every distribution's metadata (15-40 ms), and a run or a sweep point asks for ``names()`` many times; a
    distribution installed while a process runs is seen by the next process, as with any import."""
    key = (group, tuple(sys.path))
    found = _ENTRY_POINTS.get(key)
    if found is None:
        from importlib.metadata import entry_points

        found = _ENTRY_POINTS[key] = {ep.name: ep for ep in entry_points(group=group)}
    return found


class UnknownNameError(KeyError):
    """Raised for a name that is not registered or cannot be imported; the message lists the valid names."""

    def __str__(self) -> str:
        return str(self.args[0])


NO_PLUGINS_ENV = "COOPSIM_NO_PLUGINS"
"""Set to 1 (``coopsim --no-plugins`` does) to allow built-ins only: for scenarios from an untrusted source."""


def plugins_allowed() -> bool:
    """False when plug-ins are switched off (``COOPSIM_NO_PLUGINS`` set to anything but 0 or empty)."""
    return os.environ.get(NO_PLUGINS_ENV, "").strip() in ("", "0")


@dataclass(frozen=True)
class Unresolved:
    """A plug-in a run directory names that could not be had while reading it back: which, and why."""

    kind: str
    name: str
    reason: str


_READ_BACK: ContextVar[dict[tuple[str, str], type] | None] = ContextVar("coopsim_read_back", default=None)


@contextmanager
def reading_back() -> Iterator[list[Unresolved]]:
    """Read a finished run's resolved scenario without its plug-ins having to be importable here.

    Within, a name that is not a built-in and cannot be had (not installed, not on the path, or plug-ins off) is
    not an error: it resolves to a stand-in class (a subclass of the registry's base whose ``unresolved`` says why,
    with a ``Params`` that accepts the recorded parameters as they are, and whose methods raise), and the yielded
    list names it. Nothing of a stand-in runs: what needs the plug-in itself must ask ``is_stand_in`` and say what
    it does instead. Plug-ins that can be had resolve as always (never while plug-ins are off)."""
    stand_ins: dict[tuple[str, str], type] = {}
    token = _READ_BACK.set(stand_ins)
    found: list[Unresolved] = []
    try:
        yield found
    finally:
        _READ_BACK.reset(token)
        found.extend(cls.unresolved for cls in stand_ins.values())


def is_stand_in(cls: Any) -> bool:
    """True for the placeholder of a plug-in that a read-back could not import (``reading_back``)."""
    return isinstance(getattr(cls, "unresolved", None), Unresolved)


def is_plugin_path(name: str) -> bool:
    """``package.module:Attribute``: a plug-in named by its import path."""
    module, sep, attribute = name.partition(":")
    return bool(sep and module and attribute.isidentifier())


class Registry:
    """Maps a scenario name (``itsg5``, ``ela_cacc`` ...) to a class, imported on first use.

    ``group`` is the entry-point group read for installed plug-ins; ``base`` (a ``"module:Class"`` string, resolved
    lazily so the registry module imports nothing) is the class every entry must derive from. ``path_form`` is
    how error messages spell a plug-in path (``package.module:NAME`` for a registry of data, not classes).
    """

    def __init__(self, kind: str, entries: dict[str, str], group: str | None = None, base: str | None = None,
                 path_form: str = "package.module:Class") -> None:
        self.kind = kind
        self.group = group
        self._entries = dict(entries)
        self._base = base
        self.path_form = path_form

    # -- names ----------------------------------------------------------------------------------------------
    def builtin_names(self) -> list[str]:
        """The names shipped with coopsim, sorted."""
        return sorted(self._entries)

    def names(self) -> list[str]:
        """Every selectable name: built-ins and installed entry points (not while plug-ins are off), sorted."""
        return sorted({*self._entries, *self._entry_points()})

    def __contains__(self, name: str) -> bool:
        return name in self._entries or name in self._entry_points()

    def copy(self) -> Registry:
        """An independent registry with the same entries, group and base (to try a change without touching this
        one)."""
        return Registry(self.kind, self._entries, self.group, self._base, self.path_form)

    def register(self, name: str, target: str) -> None:
        """Add an entry ``name -> "package.module:Attribute"``."""
        self._entries[name] = target

    def unregister(self, name: str) -> None:
        """Remove a built-in entry (tests use it to prove the conformance suite notices)."""
        del self._entries[name]

    def _entry_points(self) -> dict[str, Any]:
        if not self.group or not plugins_allowed():
            return {}
        return _installed_entry_points(self.group)

    # -- checks ---------------------------------------------------------------------------------------------
    def check(self, name: str) -> str:
        """``name`` if selectable (registered, an entry point or a plug-in path), else ValueError with a suggestion
        and the allowed names (for validators)."""
        if name in self or (is_plugin_path(name) and plugins_allowed()):
            return name
        if _READ_BACK.get() is not None and name not in self._entries:
            return name  # resolved, or stood in for, when it is looked up
        raise ValueError(self.unknown_message(name))

    def resolve(self, name: str) -> Any:
        """``get`` for validators: the class selected by ``name``, every failure (unknown name, import error, wrong
        base class) raised as ValueError so that the scenario reports it at the field's line."""
        try:
            return self.get(name)
        except UnknownNameError as exc:
            raise ValueError(str(exc)) from None

    def unknown_message(self, name: str) -> str:
        """"unknown <kind> 'name' (did you mean ...?); allowed: ..."."""
        names = self.names()
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        if not plugins_allowed():
            return (f"unknown {self.kind} '{name}'{hint}; plug-ins are off (--no-plugins, {NO_PLUGINS_ENV}): "
                    f"allowed: {', '.join(names)}")
        return f"unknown {self.kind} '{name}'{hint}; allowed: {', '.join(names)} or a '{self.path_form}' path"

    # -- lookup ---------------------------------------------------------------------------------------------
    def get(self, name: str) -> Any:
        """Import and return the class selected by ``name``; checked against the registry's base class. While
        reading a run back (``reading_back``), a plug-in that cannot be had gives its stand-in instead."""
        try:
            return self._get(name)
        except UnknownNameError as exc:
            stand_ins = _READ_BACK.get()
            if stand_ins is None or name in self._entries:
                raise
            key = (self.kind, name)
            if key not in stand_ins:
                reason = str(exc).removeprefix(f"cannot import {self.kind} '{name}': ")
                if not plugins_allowed():
                    reason = f"plug-ins are off (--no-plugins, {NO_PLUGINS_ENV})"
                stand_ins[key] = self._stand_in(Unresolved(self.kind, name, reason))
            return stand_ins[key]

    def _stand_in(self, unresolved: Unresolved) -> type:
        """A subclass of the base (or of object) that holds the recorded parameters and runs nothing."""
        from pydantic import BaseModel, ConfigDict

        class RecordedParams(BaseModel):
            """The plug-in's parameters as the run directory recorded them (its own model is not available)."""

            model_config = ConfigDict(extra="allow", frozen=True)

        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"{unresolved.kind} '{unresolved.name}' is not available here: {unresolved.reason}")

        base = self.base() or object
        abstract = getattr(base, "__abstractmethods__", frozenset())
        namespace = {name: unavailable for name in abstract}
        namespace.update(Params=RecordedParams, unresolved=unresolved,
                         __doc__=f"Stand-in for {unresolved.kind} '{unresolved.name}' ({unresolved.reason}).")
        return type(f"StandIn[{unresolved.name}]", (base,), namespace)

    def _get(self, name: str) -> Any:
        if name in self._entries:
            obj = _import(self._entries[name], self.kind, name)
        else:
            found = self._entry_points().get(name)
            if found is not None:
                try:
                    obj = found.load()
                except Exception as exc:  # a broken plug-in names itself, never a traceback from deep inside
                    raise UnknownNameError(f"cannot load {self.kind} '{name}' ({found.value}): {exc}") from None
            elif is_plugin_path(name) and plugins_allowed():
                obj = _import(name, self.kind, name, beside_scenario=True)
            else:
                raise UnknownNameError(self.unknown_message(name))
        self._check_base(name, obj)
        return obj

    def base(self) -> type | None:
        """The class every entry derives from (None: any object)."""
        return None if self._base is None else _import(self._base, self.kind, self._base)

    def _check_base(self, name: str, obj: Any) -> None:
        base = self.base()
        if base is None:
            return
        if not (isinstance(obj, type) and issubclass(obj, base)):
            what = f"class {obj.__module__}.{obj.__qualname__}" if isinstance(obj, type) else type(obj).__name__
            raise UnknownNameError(f"{self.kind} '{name}' is not a {base.__name__} subclass (it is a {what})")


def _import(target: str, kind: str, name: str, beside_scenario: bool = False) -> Any:
    """``package.module:Attribute`` imported; ``beside_scenario``: a scenario's plug-in path, whose top-level
    package may also be found in the scenario's folder (``_import_from_scenario_dir``)."""
    module_name, _, attribute = target.partition(":")
    if beside_scenario:  # a path a scenario names: run nothing before knowing that its source defines the name
        problem = _not_defined(module_name, attribute)
        if problem:
            raise UnknownNameError(f"cannot import {kind} '{name}': {problem}{_scenario_dir_searched()}")
    try:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # the top-level name is nowhere on sys.path: a plug-in path of the scenario may name a neighbour
            if not beside_scenario or exc.name != module_name.split(".")[0] or not _import_from_scenario_dir(exc.name):
                raise
            module = importlib.import_module(module_name)
        return getattr(module, attribute)
    except (ImportError, AttributeError) as exc:
        where = _scenario_dir_searched() if beside_scenario else ""
        raise UnknownNameError(f"cannot import {kind} '{name}': {exc}{where}") from None
    except Exception as exc:  # a plug-in module that fails while importing names itself, not a deep traceback
        raise UnknownNameError(f"cannot import {kind} '{name}': {type(exc).__name__}: {exc}") from None


def _not_defined(module_name: str, attribute: str) -> str | None:
    """Why ``module_name:attribute`` is not a plug-in, found without executing any module: the module is looked up
    as the import system would (every finder, each parent package's search path, then the scenario's folder for
    the top-level name) but nothing is run, and its source must bind ``attribute`` at module level (a class, a
    function, an assignment or an import; a ``*`` import or a module ``__getattr__`` leave it open). None: import
    it. ``this:X`` or ``os:system`` are refused this way without running ``this`` or ``os``."""
    import ast
    import sys

    if module_name in sys.modules or not module_name or not attribute:
        return None  # already imported (nothing more runs), or malformed: the import reports it
    spec = _find_without_running(module_name)
    if spec is None:
        return f"No module named '{module_name}'"
    origin = spec.origin if spec.has_location else None
    if origin is None or not origin.endswith(".py"):
        return (f"module '{module_name}' has no Python source to find '{attribute}' in (a plug-in is a class "
                "defined in a Python module)")
    try:
        with open(origin, "rb") as source:
            tree = ast.parse(source.read(), origin)
    except (OSError, SyntaxError, ValueError) as exc:
        return f"module '{module_name}' cannot be read ({exc})"
    return None if _binds(tree.body, attribute) else f"module '{module_name}' ({origin}) defines no '{attribute}'"


def _find_without_running(module_name: str) -> Any:
    """The module spec of ``module_name`` from the meta path finders, parents' search paths taken from their specs
    (so no package ``__init__`` runs), or from the scenario's folder for the top-level name; None if not found."""
    import importlib.machinery
    import sys

    from .scenario_dir import current_scenario_dir

    parts = module_name.split(".")
    path: list[str] | None = None
    spec = None
    for depth in range(len(parts)):
        name = ".".join(parts[: depth + 1])
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            try:
                spec = find(name, path)
            except (ImportError, ValueError, AttributeError):
                spec = None
            if spec is not None:
                break
        if spec is None and depth == 0 and plugins_allowed() and current_scenario_dir() is not None:
            spec = importlib.machinery.PathFinder.find_spec(name, [str(current_scenario_dir())])
        if spec is None:
            return None
        path = list(spec.submodule_search_locations or [])
        if depth < len(parts) - 1 and not path:
            return None  # a module, not a package: it has no submodules
    return spec


def _binds(body: list[Any], name: str) -> bool:
    """Whether module-level statements ``body`` bind ``name`` (also inside if / try / with blocks at top level)."""
    import ast

    for node in body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name in (name, "__getattr__"):
                return True
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                return True
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*" or (alias.asname or alias.name.split(".")[0]) == name:
                    return True
        elif isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
            blocks += [handler.body for handler in getattr(node, "handlers", [])]
            if any(_binds(block, name) for block in blocks):
                return True
    return False


def _import_from_scenario_dir(top: str) -> bool:
    """Import the module or package ``top`` from the folder of the scenario being validated, if it is there.

    Only this one name is looked up there, after sys.path and without adding the folder to it: a file beside the
    scenario never shadows an installed module, and nothing else of the folder becomes importable (a plug-in
    package imports its own submodules through its ``__path__``). Plug-in paths only: built-ins and entry points
    never come from the folder, and with plug-ins off no path is imported at all."""
    import importlib.machinery
    import importlib.util
    import sys

    from .scenario_dir import current_scenario_dir

    folder = current_scenario_dir()
    if folder is None or not plugins_allowed():
        return False
    spec = importlib.machinery.PathFinder.find_spec(top, [str(folder)])
    if spec is None or spec.loader is None:
        return False
    module = importlib.util.module_from_spec(spec)
    sys.modules[top] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(top, None)  # as a failed import leaves it: a second attempt runs it again
        raise
    return True


def _scenario_dir_searched() -> str:
    """Where a plug-in path was looked for, when the scenario's folder was searched too."""
    from .scenario_dir import current_scenario_dir

    folder = current_scenario_dir()
    if folder is None or not plugins_allowed():
        return ""
    return f" (looked on sys.path and in the scenario's folder {folder})"
