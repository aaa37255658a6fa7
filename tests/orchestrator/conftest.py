"""Fixtures shared by the orchestrator tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.orchestrator.processes import coopsim_host


@pytest.fixture
def client_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The test process acts as the orchestrator of a remote host: no token and no TLS in its environment to start
    with (a test sets what it needs)."""
    for name in ("COOPSIM_TOKEN", "COOPSIM_TLS_CA", "COOPSIM_TLS_SERVER_NAME"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# -- hosts shared by the whole session: each serves every test's sessions side by side, as a host does -----------
@pytest.fixture(scope="session")
def host() -> Iterator[str]:
    """``coopsim host --allow tests.orchestrator`` on a free loopback port, one for the session; its address."""
    with coopsim_host("tests.orchestrator") as address:
        yield address


@pytest.fixture(scope="session")
def builtin_hosts() -> Iterator[dict[str, str]]:
    """One ``coopsim host --allow KIND`` per built-in kind that runs hosted (physics, v2x, control), for the
    session; their addresses by kind."""
    with coopsim_host("physics") as physics, coopsim_host("v2x") as v2x, coopsim_host("control") as control:
        yield {"physics": physics, "v2x": v2x, "control": control}
