"""Helpers for tests that start real servers (brokers, hosts) on loopback and stop them by pid."""

from __future__ import annotations

import os
import signal
import socket
import subprocess


def free_port() -> int:
    """A TCP port nothing listens on right now (another process could still take it before use)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM by pid, then SIGKILL if it has not ended within 10 s."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
