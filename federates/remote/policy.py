"""What a ``coopsim host`` lets a client choose: which federate kinds it builds, and which files and addresses
their parameters may name.

A client is a stranger until proven otherwise, so everything it sends that could reach outside the host's own
computation is refused unless the host was started allowing it:

- **Kinds.** ``physics``, ``v2x`` and ``control`` are served by default: they compute from their inputs and the
  robots' specs, open no file a client names and connect nowhere (the ITS-G5 capture goes to the session's own
  directory). Every other kind (``fmu`` opens a file, ``mqtt`` and ``helics`` connect to a broker, ``ros2`` joins
  a DDS domain) and every ``package.module:Class`` path needs ``--allow KIND_OR_PREFIX``.
- **Plug-in paths inside parameters** (a channel ``type: pkg.mod:Model``, a robot's controller) are class imports
  too, so they need an ``--allow`` prefix as well.
- **Files.** A parameter named like a path (``path``, ``file``, ``*_dir`` ...) or a value that looks like one
  (absolute, ``~``, ``./``, a ``..`` segment, ``file://``) must resolve inside an ``--allow-path`` directory.
- **Addresses.** A parameter named like an address (``broker``, ``host``, ``url`` ...) or a value shaped like
  ``host:port`` or ``scheme://...`` must be one of the ``--allow-broker HOST:PORT`` entries. Constructor defaults
  count too: ``mqtt`` without a ``broker`` would connect to its default, so that default must be allowed.

Every refusal is a PermissionError that names the parameter by its dotted path and the flag that would allow it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

SAFE_KINDS = ("physics", "v2x", "control")
"""Built-in kinds served without ``--allow``: no file or network parameters."""

_PLUGIN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_PATH_KEY = re.compile(r"(^|_)(path|file|filename|dir|directory|folder)s?$")
_ADDRESS_KEY = re.compile(r"(^|_)(broker|host|hostname|address|addr|url|uri|endpoint|server)s?$")


@dataclass(frozen=True)
class HostPolicy:
    """The host's allow-lists: ``allow`` kinds or module prefixes (beyond :data:`SAFE_KINDS`), ``paths``
    (directories that file parameters may point into) and ``brokers`` (``host:port`` addresses parameters may
    name)."""

    allow: tuple[str, ...] = ()
    paths: tuple[Path, ...] = ()
    brokers: tuple[str, ...] = ()
    safe_kinds: tuple[str, ...] = field(default=SAFE_KINDS)

    @classmethod
    def from_options(cls, allow: Iterable[str] = (), paths: Iterable[str | Path] = (),
                     brokers: Iterable[str] = ()) -> HostPolicy:
        """A policy from the command-line values; brokers must be ``host:port``."""
        bad = [b for b in brokers if not _HOST_PORT.match(b)]
        if bad:
            raise ValueError(f"--allow-broker takes HOST:PORT, got '{bad[0]}'")
        return cls(tuple(allow), tuple(Path(p).expanduser().resolve() for p in paths),
                   tuple(b.lower() for b in brokers))

    # -- kinds --------------------------------------------------------------------------------------------------
    def _module_allowed(self, module: str) -> bool:
        return any(module == a or module.startswith(a + ".") for a in self.allow)

    def check_kind(self, kind: str) -> None:
        """Refuse a federate kind the host does not serve."""
        if ":" in kind:
            module = kind.split(":", 1)[0]
            if not self._module_allowed(module):
                raise PermissionError(f"this host does not serve '{kind}'; start it with --allow "
                                   f"{module.rsplit('.', 1)[0]} (a package or module prefix)")
        elif kind not in self.safe_kinds and kind not in self.allow:
            raise PermissionError(f"this host does not serve '{kind}'; start it with --allow {kind} (served by "
                               f"default: {', '.join(self.safe_kinds)})")

    # -- parameters ---------------------------------------------------------------------------------------------
    def check_params(self, cls: type, name: str, params: Mapping[str, Any]) -> None:
        """Refuse parameters of ``cls(name, **params)`` that name a file, an address or a plug-in class the host
        does not allow; the constructor's defaults are checked as well, since they are used when a parameter is
        left out."""
        try:
            bound = inspect.signature(cls).bind_partial(name, **params)
        except TypeError as exc:
            raise TypeError(f"bad parameters for '{cls.__name__}': {exc}") from None
        except ValueError:  # no signature to inspect: check what was sent
            self.check_values(params)
            return
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        arguments.pop(next(iter(arguments)), None)  # the federate's name is a label, not a parameter
        self.check_values(arguments)

    def check_values(self, values: Mapping[str, Any], where: str = "") -> None:
        """Refuse any file, address or plug-in path in ``values`` (nested dicts and lists) that is not allowed;
        the error names the parameter by its dotted path."""
        for key, value in values.items():
            self._check(str(key), value, f"{where}{key}")

    def _check(self, key: str, value: Any, where: str) -> None:
        if isinstance(value, Mapping):
            self.check_values(value, where + ".")
        elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
            for i, item in enumerate(value):
                self._check(key, item, f"{where}[{i}]")
        elif isinstance(value, str):
            self._check_string(key.lower(), value, where)

    def _check_string(self, key: str, value: str, where: str) -> None:
        if _PLUGIN.match(value):
            if not self._module_allowed(value.split(":", 1)[0]):
                raise PermissionError(f"parameter '{where}' = '{value}' names a class this host does not serve; start "
                                   f"it with --allow {value.split(':', 1)[0]}")
            return
        if _PATH_KEY.search(key) or _looks_like_path(value):
            if _URL.match(value) and not value.lower().startswith("file://"):
                self._check_address(value, where)
                return
            self._check_path(value, where)
            return
        if _ADDRESS_KEY.search(key) or _HOST_PORT.match(value) or _URL.match(value):
            self._check_address(value, where)

    def _check_path(self, value: str, where: str) -> None:
        raw = value[len("file://"):] if value.lower().startswith("file://") else value
        # resolve() follows symbolic links, so a link inside an allowed directory cannot lead out of it
        resolved = Path(raw).expanduser().resolve()
        if not any(resolved.is_relative_to(root) for root in self.paths):
            allowed = ", ".join(str(p) for p in self.paths) or "none"
            raise PermissionError(f"parameter '{where}' = '{value}' is a file outside the directories this host may "
                               f"use (allowed: {allowed}); start it with --allow-path DIR")

    def _check_address(self, value: str, where: str) -> None:
        text = value.strip().lower()
        if _URL.match(text):
            parts = urlsplit(text)
            text = parts.netloc.rsplit("@", 1)[-1]
        hosts = {b.rsplit(":", 1)[0] for b in self.brokers}
        if text in self.brokers or (":" not in text.strip("[]") and text in hosts):
            return
        allowed = ", ".join(self.brokers) or "none"
        raise PermissionError(f"parameter '{where}' = '{value}' is an address this host may not connect to "
                           f"(allowed: {allowed}); start it with --allow-broker HOST:PORT")


def _looks_like_path(value: str) -> bool:
    """A string that can only be meant as a file: absolute, home-relative, explicitly relative, climbing out with
    ``..``, or a ``file://`` URL. (A plain ``a/b`` is not: topics and prefixes look like that.)"""
    if value.startswith(("/", "~", "./", ".\\", "\\")) or value.lower().startswith("file://"):
        return True
    if re.match(r"^[A-Za-z]:[\\/]", value):
        return True
    return ".." in re.split(r"[\\/]", value)
