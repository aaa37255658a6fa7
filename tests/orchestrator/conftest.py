"""Fixtures shared by the orchestrator tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def client_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The test process acts as the orchestrator of a remote host: no token and no TLS in its environment to start
    with (a test sets what it needs)."""
    for name in ("COOPSIM_TOKEN", "COOPSIM_TLS_CA", "COOPSIM_TLS_SERVER_NAME"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch
