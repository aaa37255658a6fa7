"""What an exception out of a federate's code becomes: the federate's ``FederateError`` naming it and the time,
whatever it raised (``sys.exit`` and other ``BaseException``s included), except the run's own interrupt."""

from __future__ import annotations

from core.federate import FederateError

from .run_control import RunControl


class PluginExitError(RuntimeError):
    """A federate's code called ``sys.exit`` or raised a ``BaseException`` that is not an ``Exception``: its
    failure, not the run's end."""


def federate_failure(name: str, t_ns: int, exc: BaseException, control: RunControl | None,
                     robot: str | None = None) -> BaseException:
    """What an exception out of federate ``name``'s code becomes: its ``FederateError``, whatever it was
    (``SystemExit``, a ``KeyboardInterrupt`` of its own, any ``BaseException``), except the run's own interrupt
    (the user's second signal), which goes on as it is."""
    if isinstance(exc, FederateError) and exc.federate == name:
        return exc  # already names it (a port its step() published broke its contract)
    if not isinstance(exc, Exception):
        if control is not None and control.owns(exc):
            return exc
        if control is None and isinstance(exc, KeyboardInterrupt):
            return exc  # no handler of a run installed: SIGINT raises, so it may be the user's
        if isinstance(exc, SystemExit):
            exc = PluginExitError(f"called sys.exit({exc.code!r}); a federate cannot end the run")
        elif isinstance(exc, KeyboardInterrupt):
            exc = PluginExitError("raised KeyboardInterrupt itself (no interrupt signal came)")
        else:
            exc = PluginExitError(f"raised {type(exc).__name__}: {exc}")
    return FederateError(name, t_ns, exc, robot=robot)
