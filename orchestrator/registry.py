"""Name -> class registries, imported lazily so a missing optional dependency only breaks its own entry."""

from __future__ import annotations

import difflib
import importlib
from typing import Any


class UnknownNameError(KeyError):
    """Raised for a name that is not registered; the message lists the valid names."""

    def __str__(self) -> str:
        return str(self.args[0])


class Registry:
    """Maps a scenario name (``itsg5``, ``ela_cacc`` ...) to ``module:attribute``, imported on first use."""

    def __init__(self, kind: str, entries: dict[str, str]) -> None:
        self.kind = kind
        self._entries = dict(entries)

    def names(self) -> list[str]:
        """All registered names, sorted."""
        return sorted(self._entries)

    def register(self, name: str, target: str) -> None:
        """Add an entry ``name -> "package.module:Attribute"``."""
        self._entries[name] = target

    def check(self, name: str) -> str:
        """``name`` if registered, else ValueError with a suggestion and the allowed names (for validators)."""
        if name not in self._entries:
            raise ValueError(self.unknown_message(name))
        return name

    def unknown_message(self, name: str) -> str:
        """"unknown <kind> 'name' (did you mean ...?); allowed: ..."."""
        close = difflib.get_close_matches(name, self._entries, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"unknown {self.kind} '{name}'{hint}; allowed: {', '.join(self.names())}"

    def get(self, name: str) -> Any:
        """Import and return the object registered as ``name``; a ``package.module:Attribute`` path is imported
        directly (plug-ins that are not registered)."""
        if ":" in name and name not in self._entries:
            module_name, _, attribute = name.partition(":")
            try:
                return getattr(importlib.import_module(module_name), attribute)
            except (ImportError, AttributeError) as exc:
                raise UnknownNameError(f"cannot import {self.kind} '{name}': {exc}") from None
        try:
            target = self._entries[name]
        except KeyError:
            raise UnknownNameError(self.unknown_message(name)) from None
        module_name, _, attribute = target.partition(":")
        return getattr(importlib.import_module(module_name), attribute)
