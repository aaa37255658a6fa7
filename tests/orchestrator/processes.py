"""Helpers for tests that start real servers (brokers, hosts) on loopback and stop them by pid."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path


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


@contextlib.contextmanager
def coopsim_host(allow: str, python_path: Sequence[Path] = (), *options: str) -> Iterator[str]:
    """``coopsim host --allow <allow>`` on a free loopback port, stopped by pid; yields its address."""
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, python_path), str(repo)])}
    with listening([sys.executable, "-m", "orchestrator.cli", "host", "--listen", "127.0.0.1:0", "--allow", allow,
                    *options], repo, env) as address:
        yield address


@contextlib.contextmanager
def listening(command: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """A server process that prints "... listening on port N" first, stopped by pid; yields its loopback
    address."""
    proc = subprocess.Popen(list(command), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert "listening on port" in line, line
        yield f"127.0.0.1:{int(line.rsplit(' ', 1)[1])}"
    finally:
        stop(proc)
