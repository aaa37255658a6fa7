"""Federates over framed TCP (``framed://host:port``): real ``coopsim host --framed-listen`` processes on loopback,
started and stopped by pid. The same sessions as over gRPC, under the same rules: token, limits, idle sessions,
garbage, TLS."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from federates.remote.client import RemoteError, build_request
from federates.remote.codec import pb
from federates.remote.framing import HEADER, PREAMBLE, frame
from orchestrator.runner import run_scenario
from orchestrator.scenario import ScenarioError, parse_scenario
from tests.orchestrator.processes import stop
from tests.orchestrator.test_host_security import (
    PROBE,
    Session,
    _clean_env,
    _itsg5,
    _self_signed,
    expect_token_refusals,
)
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
PLATOON = (REPO / "scenarios" / "platoon.yaml").read_text()
QUIET = ["outputs.plots=false", "outputs.report=false", "duration_s=2"]


@contextlib.contextmanager
def framed_host(tmp_path: Path, *options: str, env: dict[str, str] | None = None,
                listen: str = "127.0.0.1:0") -> Iterator[tuple[int, subprocess.Popen]]:
    """``coopsim host --framed-listen LISTEN OPTIONS`` (gRPC beside it on a free loopback port); the framed port
    and the process, stopped by pid at the end. Its stderr must never hold a traceback."""
    errors = tmp_path / f"host-{time.monotonic_ns()}.err"
    with errors.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "host", "--listen", "127.0.0.1:0",
                                 "--framed-listen", listen, *options], cwd=REPO, env=env or _clean_env(),
                                stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        assert proc.stdout is not None
        first, second = proc.stdout.readline(), proc.stdout.readline()
        assert "listening on port" in first and second.startswith("coopsim framed host listening on port"), (
            first, second, errors.read_text())
        yield int(second.rsplit(" ", 1)[1]), proc
    finally:
        stop(proc)
        assert "Traceback" not in errors.read_text(), errors.read_text()


class Raw:
    """A framed-TCP peer that sends exactly the bytes it is given (not only what coopsim's client would)."""

    def __init__(self, port: int, preamble: bytes = PREAMBLE, token: bytes = b"") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.sock.sendall(preamble + frame(token))

    def read(self) -> pb.Reply | None:
        """The next reply frame (None: the host closed the connection)."""
        header = self._exactly(HEADER.size)
        if header is None:
            return None
        body = self._exactly(HEADER.unpack(header)[0])
        return None if body is None else pb.Reply.FromString(body)

    def _exactly(self, size: int) -> bytes | None:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def _entry(name: str, remote: str | None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": PROBE, "params": {"gain": 2.5}, **({"remote": remote} if remote else {}), **extra}


def _run(tmp_path: Path, where: str, overrides: list[str]) -> Any:
    result = run_scenario(parse_scenario(PLATOON, overrides=[*QUIET, *overrides]), tmp_path / where)
    assert result.ok, result.error
    return result


@pytest.mark.slow
def test_a_platoon_over_framed_tcp_gives_the_in_process_digest(tmp_path, client_env):
    """Physics hosted (execution.remote) and a probe hosted (federates: remote:), both over framed TCP."""
    local = _run(tmp_path, "local", [f"federates=[{_entry('probe', None)}]".replace("'", '"')])
    with framed_host(tmp_path, "--allow", "tests.orchestrator") as (port, _):
        address = f"framed://127.0.0.1:{port}"
        hosted = _run(tmp_path, "hosted", [f"federates=[{_entry('probe', address)}]".replace("'", '"'),
                                           f"execution.remote={{physics: '{address}'}}"])
    assert hosted.run_info["digest"] == local.run_info["digest"]


def test_remote_addresses_name_their_transport(tmp_path):
    entry = '[{name: sim, type: "a.b:C", remote: "framed://10.0.0.5:7001"}]'
    assert parse_scenario(PLATOON, overrides=[f"federates={entry}"]).federates[0].remote == "framed://10.0.0.5:7001"
    with pytest.raises(ScenarioError, match=r"unknown transport 'http' in 'http://10.0.0.5:7001': use host:port "
                                            r"\(gRPC\), grpc://host:port or framed://host:port"):
        parse_scenario(PLATOON, overrides=['federates=[{name: sim, type: "a.b:C", remote: "http://10.0.0.5:7001"}]'])
    with pytest.raises(ScenarioError, match=r"remote\.physics unknown transport 'tcp'"):
        parse_scenario(PLATOON, overrides=["execution.remote={physics: 'tcp://127.0.0.1:1'}"])
    with pytest.raises(ScenarioError, match="remote must be 'host:port' or 'framed://host:port'"):
        parse_scenario(PLATOON, overrides=['federates=[{name: sim, type: "a.b:C", remote: "framed://10.0.0.5"}]'])


def test_an_unreachable_framed_host_is_a_clear_error(tmp_path, client_env):
    entry = _entry("probe", "framed://127.0.0.1:9", connect_timeout_s=0.5)  # discard port: nothing listens
    result = run_scenario(parse_scenario(PLATOON, overrides=[*QUIET, f"federates=[{entry}]".replace("'", '"')]),
                          tmp_path / "run")
    assert not result.ok and result.error.federate == "probe"
    assert "no coopsim host answers at framed://127.0.0.1:9" in str(result.error)
    assert "coopsim host --framed-listen" in str(result.error)


# -- identity -------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_token_is_required_beyond_loopback(tmp_path):
    for listen in ("0.0.0.0:0", "[::]:0"):
        done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "host", "--listen", "127.0.0.1:0",
                               "--framed-listen", listen], cwd=REPO, env=_clean_env(), capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2 and done.stdout == ""
        assert f"error: listening on {listen} reaches beyond loopback and needs a token" in done.stderr


def test_only_clients_with_the_token_get_a_session(tmp_path, client_env):
    with framed_host(tmp_path, "--allow", "tests.orchestrator", env=_clean_env(COOPSIM_TOKEN="s3cret")) as (port, _):
        address = f"framed://127.0.0.1:{port}"
        expect_token_refusals(client_env, address, "s3cret")
        raw = Raw(port, token=b"wrong")  # refused, then the connection is closed
        reply = raw.read()
        assert reply is not None and reply.error.type == "UNAUTHENTICATED" and raw.read() is None
        raw.close()
        client_env.setenv("COOPSIM_TOKEN", "s3cret")
        session = Session(address)
        assert session.setup(PROBE, {})["period_ns"] == 20_000_000
        session.call("finalize")
        session.close()


# -- limits and garbage ---------------------------------------------------------------------------------------
def test_oversize_garbage_and_strangers_get_an_error_reply_and_the_connection_ends(tmp_path, client_env):
    limit = 1024 * 1024
    with framed_host(tmp_path, "--max-message-mb", "1") as (port, proc):
        raw = Raw(port)
        assert raw.read() == pb.Reply()  # the empty reply: the session is open
        raw.sock.sendall(HEADER.pack(2**32 - 1))  # 4 GiB announced, never sent: refused on the prefix alone
        reply = raw.read()
        assert reply is not None and reply.error.type == "RESOURCE_EXHAUSTED"
        assert f"a request of {2**32 - 1} bytes, more than this host's limit of {limit}" in reply.error.message
        assert raw.read() is None
        raw.close()
        # the same through coopsim's client, with a request just over the limit
        session = Session(f"framed://127.0.0.1:{port}")
        with pytest.raises(RemoteError, match="failed during 'step': RESOURCE_EXHAUSTED a request of"):
            session.call("step", t_ns=0, inputs={"pad": {"x": np.zeros(limit // 8 + 16)}})
        session.close()
        # bytes that are no request: one error reply, then the connection ends
        raw = Raw(port)
        assert raw.read() == pb.Reply()
        raw.sock.sendall(frame(b"\xff" * 64))
        reply = raw.read()
        assert reply is not None and reply.error.type == "CodecError"
        assert "not a coopsim.federate.v1.Request" in reply.error.message and raw.read() is None
        raw.close()
        # a request under the limit is answered, and the session goes on
        raw = Raw(port)
        assert raw.read() == pb.Reply()
        for _ in range(2):
            raw.sock.sendall(frame(build_request("next_time").SerializeToString()))
            reply = raw.read()
            assert reply is not None and reply.error.message == "'next_time' before 'setup'"
        raw.close()
        # not this protocol at all, or a token frame too large to be one
        for preamble, token, what in ((b"GET / HTTP/1.1\r\n", b"", "not a coopsim framed-TCP client"),
                                      (PREAMBLE, b"x" * 5000, "an authentication frame of 5000 bytes")):
            raw = Raw(port, preamble, token)
            reply = raw.read()
            assert reply is not None and reply.error.type == "INVALID_ARGUMENT" and what in reply.error.message
            assert raw.read() is None
            raw.close()
        assert proc.poll() is None  # still serving


@pytest.mark.slow
def test_max_sessions_idle_close_and_cleanup(tmp_path, client_env):
    temp = tmp_path / "tmp"
    temp.mkdir()
    with framed_host(tmp_path, "--max-sessions", "2", "--idle-timeout-s", "2", "--allow", "tests.orchestrator",
                     env=_clean_env(TMPDIR=str(temp))) as (port, _):
        address = f"framed://127.0.0.1:{port}"
        sessions = [Session(address) for _ in range(2)]
        for session in sessions:
            session.setup(PROBE, {})
        # both slots taken: turned away at once, saying why (not queued: a queued setup would have been served
        # once the idle sessions below were closed)
        third = Session(address)
        with pytest.raises(RemoteError, match=r"failed during 'setup': RESOURCE_EXHAUSTED this host serves 2 "
                                              r"federates at once \(--max-sessions\)"):
            third.setup(PROBE, {})
        third.close()

        # silent for longer than --idle-timeout-s, both are closed: a new session is served once each slot frees
        # (a refused attempt touches neither of the silent sessions)
        def served() -> Session | None:
            session = Session(address)
            try:
                session.setup(PROBE, {})
            except RemoteError as exc:
                session.close()
                assert "RESOURCE_EXHAUSTED" in str(exc), exc
                return None
            return session

        fresh = [wait_until(served, "an idle session to be closed", poll_s=0.1) for _ in range(2)]
        for session in fresh:
            session.close()
        # ... and told why
        for session in sessions:
            with pytest.raises(RemoteError, match=r"failed during 'next_time': CANCELLED this host closed the "
                                                  r"session: the session was silent .* \(a host closes a session"):
                session.call("next_time")
            session.close()
        # the slots are free again; a session writing files has them removed when its client goes away
        params, robots = _itsg5()
        session = Session(address)
        session.setup("v2x", params, out_dir="run")
        session.call("spawn", robots=robots)
        (live,) = temp.iterdir()
        assert (live / "v2x.pcap").is_file()
        session.close()  # no finalize: the host finalizes the federate and removes its directory
        wait_until(lambda: not any(temp.iterdir()), "the session's temporary directory to be removed")
        assert list(temp.iterdir()) == []


@pytest.mark.slow
def test_tls_round_trip_and_sigterm(tmp_path, client_env):
    cert, key = _self_signed(tmp_path)
    env = _clean_env(COOPSIM_TOKEN="tls-token")
    with framed_host(tmp_path, "--allow", "tests.orchestrator", "--tls-cert", str(cert), "--tls-key", str(key),
                     env=env) as (port, proc):
        address = f"framed://127.0.0.1:{port}"
        client_env.setenv("COOPSIM_TOKEN", "tls-token")
        session = Session(address)  # without the certificate to trust: plain TCP to a TLS listener
        with pytest.raises(RemoteError, match="a host started with --tls-cert needs COOPSIM_TLS_CA here"):
            session.setup(PROBE, {})
        session.close()
        client_env.setenv("COOPSIM_TLS_CA", str(cert))
        local = _run(tmp_path, "local", [f"federates=[{_entry('probe', None)}]".replace("'", '"')])
        hosted = _run(tmp_path, "hosted", [f"federates=[{_entry('probe', address)}]".replace("'", '"')])
        assert hosted.run_info["digest"] == local.run_info["digest"]
        client_env.setenv("COOPSIM_TLS_SERVER_NAME", "elsewhere.example")  # not a name in the certificate
        with pytest.raises(RemoteError, match=f"the host at {address}: TLS with the host failed"):
            Session(address)
        client_env.delenv("COOPSIM_TLS_SERVER_NAME")
        session = Session(address)  # an open session does not hold the host up when it is told to stop
        session.setup(PROBE, {})
        os.kill(proc.pid, 15)
        proc.wait(timeout=60)  # not held up: the open session would keep a waiting host for its 120 s idle timeout
        assert proc.returncode is not None
        with pytest.raises(RemoteError, match=r"failed during 'next_time': CANCELLED this host closed the "
                                              r"session: the host is stopping"):
            session.call("next_time")
        session.close()


def test_a_host_that_stops_answering_is_a_timeout_naming_the_call(tmp_path, client_env):
    with framed_host(tmp_path, "--allow", "tests.orchestrator") as (port, _):
        address = f"framed://127.0.0.1:{port}"
        session = Session(address, call_timeout_s=0.5)
        # the probe stalls for 120 s in its step at t = 0: an answer could only come long after the call's timeout
        session.setup(PROBE, {"stall_at_s": 0.0, "stall_s": 120.0})
        session.call("spawn", robots=[])
        state = {"id": np.array([1]), "v": np.array([1.0]), "yaw": np.array([0.0])}
        with pytest.raises(RemoteError, match=rf"the host at {address} did not answer 'step' within 0.5 s"):
            session.call("step", t_ns=0, inputs={"state": state, "cam_rx": []})
        with pytest.raises(RemoteError, match=rf"'next_time' on a closed connection to {address}"):
            session.call("next_time")
        session.close()
