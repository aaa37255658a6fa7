"""Live view of a running simulation (``coopsim run SCENARIO --live [PORT]``).

A scheduler observer (``snapshot``) hands references to the published robot states and V2X log to a sender thread
at a bounded wall-clock rate, latest wins; the server (``server``) turns them into JSON frames (``frames``) for a
self-contained page (``page.html``) that draws the robots, their V2X links and a few time series. Watching never
changes a run, and an unwatched run pays one boolean check per instant. See ``docs/live.md``.
"""

from .server import DEFAULT_PORT, LiveServer, LiveViewError, start_live_view
from .snapshot import LiveObserver

__all__ = ["DEFAULT_PORT", "LiveObserver", "LiveServer", "LiveViewError", "start_live_view"]
