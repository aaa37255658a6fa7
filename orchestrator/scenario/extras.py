"""Whether the optional ``mcap`` package is installed: asked when a scenario sets ``outputs.mcap`` (so a missing
package is a validation error, not a failure at the end of a run) and by ``coopsim mcap``."""

from __future__ import annotations

MCAP_EXTRA = "coopsim[mcap]"
MISSING_MESSAGE = (f"writing run.mcap needs the 'mcap' package, which is not installed: pip install '{MCAP_EXTRA}' "
                   "(or pip install mcap)")


def mcap_available() -> bool:
    """True when ``mcap.writer`` imports."""
    try:
        import mcap.writer  # noqa: F401  (only whether it imports)
    except ImportError:
        return False
    return True
