"""A ``coopsim host`` facing a hostile or careless client: real hosts on 127.0.0.1, started and stopped by pid.

Every case of the attack on the host: where it writes, which kinds, files and addresses it accepts, how large a
frame and how long a silent stream it tolerates, who may talk to it, how it stops. Nothing here sends traffic
anywhere but loopback; 0.0.0.0 is only bound to prove that the host refuses to.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from google.protobuf.message import DecodeError

from core.auth import is_loopback
from federates.remote.client import RemoteError, RemoteFederate, build_request
from federates.remote.codec import CodecError, decode_array, pb
from federates.remote.host import METHOD, session_label
from orchestrator.build.world import build_world
from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario
from tests.orchestrator.processes import free_port, stop
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
PLATOON = (REPO / "scenarios" / "platoon.yaml").read_text()
QUIET = ["outputs.plots=false", "outputs.report=false", "duration_s=2"]
PROBE = "tests.orchestrator.plugins:Probe"


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any coopsim identity, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COOPSIM_")}
    return {**env, "PYTHONPATH": str(REPO), **extra}


@contextlib.contextmanager
def running_host(*options: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """``coopsim host --listen 127.0.0.1:0 OPTIONS``; its address and process, stopped by pid at the end."""
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "host", "--listen", "127.0.0.1:0", *options],
                            cwd=REPO, env=env or _clean_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert "listening on port" in line, line
        yield f"127.0.0.1:{int(line.rsplit(' ', 1)[1])}", proc
    finally:
        stop(proc)


class Session:
    """One session at a host, driven request by request as any client could (not only coopsim's)."""

    def __init__(self, address: str, call_timeout_s: float = 20.0) -> None:
        self._proxy = RemoteFederate("raw", address, "physics", connect_timeout_s=5, call_timeout_s=call_timeout_s)
        self._proxy._open()

    def call(self, call: str, **fields: Any) -> Any:
        return self._proxy._call(call, **fields)

    def setup(self, type: str, params: dict[str, Any], out_dir: str | None = "run", name: str = "fed") -> Any:
        return self.call("setup", federate={"name": name, "type": type, "params": params}, seed=1,
                         end_ns=1_000_000_000, out_dir=out_dir)

    def close(self) -> None:
        self._proxy._close()


def _itsg5() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The V2X federate's parameters for the platoon with ITS-G5 (which writes v2x.pcap), and its robots."""
    from core.robots import robot_fields

    world = build_world(parse_scenario(PLATOON, overrides=["channel.type=itsg5"]))
    v2x = world.federates["v2x"]
    return {"step_ns": v2x.step_ns, "channel": v2x.channel_config}, [robot_fields(r) for r in world.robots]


def _padded(n: int) -> bytes:
    """A step request carrying ``n`` float64 zeros (before setup: the host can only refuse it)."""
    return build_request("step", t_ns=0, inputs={"pad": {"x": np.zeros(n)}}).SerializeToString()


def _send_raw(address: str, frames: list[bytes]) -> Any:
    """Send ``frames`` on one stream and return the first reply, or the (code, details) it failed with."""
    with grpc.insecure_channel(address, options=[("grpc.max_send_message_length", -1)]) as channel:
        replies = channel.stream_stream(METHOD)(iter(frames), timeout=20)
        try:
            return pb.Reply.FromString(next(replies))
        except grpc.RpcError as exc:
            return exc.code(), exc.details()


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


# -- outputs --------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_client_chosen_out_dir_writes_nothing_outside_the_out_root(tmp_path, client_env):
    root, victim = tmp_path / "root", tmp_path / "victim"
    victim.mkdir()
    (victim / "v2x.pcap").write_bytes(b"precious")
    params, robots = _itsg5()
    hostile = [str(victim), str(victim / "new"), "../../victim", "..", "/", "~/x", "a\\..\\..\\b"]
    with running_host("--out-root", str(root)) as (address, _):
        for out_dir in hostile:
            session = Session(address)
            try:
                session.setup("v2x", params, out_dir=out_dir)
                session.call("spawn", robots=robots)
                session.call("finalize")
            finally:
                session.close()
    assert (victim / "v2x.pcap").read_bytes() == b"precious" and sorted(p.name for p in victim.iterdir()) == [
        "v2x.pcap"]
    assert not (tmp_path / "new").exists() and not (Path.home() / "x").exists()
    # one new directory per session right under the out-root, named by a sanitised label, holding the capture
    sessions = sorted(root.iterdir())
    assert len(sessions) == len(hostile)
    for directory in sessions:
        assert directory.is_dir() and directory.parent == root and "/" not in directory.name
        assert directory.name.split("-")[0] not in ("", ".", "..")
        assert (directory / "v2x.pcap").read_bytes()[:4] == bytes.fromhex("d4c3b2a1")  # pcap magic, little-endian
    assert {session_label(d, "fed") for d in hostile} <= {d.name.rsplit("-", 1)[0] for d in sessions}


@pytest.mark.slow
def test_without_an_out_root_each_session_writes_to_a_temporary_directory_removed_at_its_end(tmp_path, client_env):
    temp = tmp_path / "tmp"
    temp.mkdir()
    params, robots = _itsg5()
    with running_host(env=_clean_env(TMPDIR=str(temp))) as (address, _):
        session = Session(address)
        session.setup("v2x", params, out_dir=str(tmp_path / "victim"))
        session.call("spawn", robots=robots)
        (live,) = temp.iterdir()
        assert live.name.startswith("coopsim-host-victim-fed-") and (live / "v2x.pcap").is_file()
        session.call("finalize")
        session.close()
        wait_until(lambda: not any(temp.iterdir()), "the session's temporary directory to be removed")
        assert list(temp.iterdir()) == []
    assert not (tmp_path / "victim").exists()


# -- kinds, files, addresses ----------------------------------------------------------------------------------
def test_kinds_beyond_the_safe_default_set_need_allow(client_env):
    with running_host() as (address, _):
        for kind in ("fmu", "mqtt", "helics", "ros2", PROBE):
            session = Session(address)
            with pytest.raises(RemoteError, match=rf"PermissionError: this host does not serve '{kind}'; start it "
                                                  r"with --allow"):
                session.setup(kind, {})
            session.close()
        session = Session(address)  # a safe kind is served, but a plug-in class inside its parameters is not
        params, _ = _itsg5()
        with pytest.raises(RemoteError, match=r"parameter 'channel.type' = 'os:system' names a class this host does "
                                              r"not serve; start it with --allow os"):
            session.setup("v2x", {**params, "channel": {**params["channel"], "type": "os:system"}})
        session.close()


def test_file_and_broker_params_outside_the_allowed_set_are_refused(tmp_path, client_env):
    models, elsewhere = tmp_path / "models", tmp_path / "elsewhere"
    models.mkdir()
    elsewhere.mkdir()
    (elsewhere / "secret.fmu").write_bytes(b"x")
    (models / "link.fmu").symlink_to(elsewhere / "secret.fmu")
    broker = f"127.0.0.1:{free_port()}"  # allowed, and nothing listens there
    refused = {  # kind, params -> the parameter the error must name
        ("fmu", ("path", "/etc/passwd")): "path",
        ("fmu", ("path", str(elsewhere / "secret.fmu"))): "path",
        ("fmu", ("path", str(models / ".." / "elsewhere" / "secret.fmu"))): "path",
        ("fmu", ("path", str(models / "link.fmu"))): "path",  # a link out of the allowed directory
        ("mqtt", ("broker", "10.0.0.1:1883")): "broker",
        ("mqtt", ("broker", "127.0.0.1:1")): "broker",
        ("mqtt", None): "broker",  # its default broker is an address too
        ("helics", ("broker", "tcp://127.0.0.1:23500")): "broker",
    }
    with running_host("--allow", "fmu", "--allow", "mqtt", "--allow", "helics", "--allow-path", str(models),
                      "--allow-broker", broker) as (address, _):
        for (kind, param), name in refused.items():
            session = Session(address)
            with pytest.raises(RemoteError) as error:
                session.setup(kind, dict([param]) if param else {})
            session.close()
            message = str(error.value)
            assert message.startswith(f"remote: PermissionError: parameter '{name}' = "), (kind, param, message)
            flag = "--allow-path DIR" if name == "path" else "--allow-broker HOST:PORT"
            assert message.endswith(f"start it with {flag}"), message
        # allowed ones pass the check and fail only for what they are: no FMU there, no broker listening
        for kind, params in (("fmu", {"path": str(models / "missing.fmu")}),
                             ("mqtt", {"broker": broker, "connect_timeout_s": 2})):
            session = Session(address)
            with pytest.raises(RemoteError) as error:
                session.setup(kind, params)
                session.call("spawn", robots=[])
                session.call("step", t_ns=0, inputs={})
            session.close()
            assert "PermissionError" not in str(error.value), str(error.value)


@pytest.mark.slow
def test_a_plug_in_class_in_a_robots_config_is_refused_at_spawn(client_env):
    params, robots = _itsg5()
    robots[1]["config"]["controller"]["type"] = "subprocess:Popen"
    with running_host() as (address, _):
        session = Session(address)
        session.setup("v2x", params, out_dir=None)
        with pytest.raises(RemoteError, match=r"parameter 'robots\[1\].config.controller.type' = 'subprocess:Popen' "
                                              r"names a class this host does not serve"):
            session.call("spawn", robots=robots)
        session.close()


# -- limits ---------------------------------------------------------------------------------------------------
def test_a_frame_over_the_limit_is_refused_without_the_host_growing(client_env):
    limit = 1024 * 1024
    just_over = _padded(limit // 8 + 16)
    assert limit < len(just_over) < limit + 1024
    large = _padded(48 * limit // 8)  # 48 MiB, as a hostile peer would
    with running_host("--max-message-mb", "1") as (address, proc):
        before = _peak_rss_kb(proc.pid)
        for frame in (just_over, large):
            code, details = _send_raw(address, [frame])
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and f"vs. {limit})" in details, details
        grown_mb = (_peak_rss_kb(proc.pid) - before) / 1024
        assert grown_mb < 16, f"peak memory grew by {grown_mb:.1f} MB for refused frames"
        # still serving, and a frame under the limit is read
        reply = _send_raw(address, [_padded(limit // 16)])
        assert (reply.error.type, reply.error.message) == ("RuntimeError", "'step' before 'setup'")
        # bytes that are no request get one error reply, then the stream ends
        reply = _send_raw(address, [b"\xff" * 64])
        assert reply.error.type == "CodecError" and "not a coopsim.federate.v1.Request" in reply.error.message


def test_the_array_decoder_bounds_what_it_reads():
    array = pb.Array(dtype=pb.DTYPE_FLOAT64, shape=[10], data=np.arange(10.0).tobytes())
    assert decode_array(array).tolist() == list(range(10))
    for shape in ([11], [2**40], [10, 2**62]):  # a shape the bytes do not fill is refused before any allocation
        with pytest.raises(CodecError, match=r"bytes for shape"):
            decode_array(pb.Array(dtype=pb.DTYPE_FLOAT64, shape=shape, data=array.data))
    # nested past the parser's recursion limit: a DecodeError, never a RecursionError
    def wrapped(inner: bytes, tag: int) -> bytes:  # length-delimited field ``tag`` holding ``inner``
        size, varint = len(inner), b""
        while True:
            varint += bytes([(size & 0x7F) | (0x80 if size > 0x7F else 0)])
            size >>= 7
            if not size:
                return bytes([tag]) + varint + inner

    deep = pb.Value(string="x").SerializeToString()
    for _ in range(300):  # Value.list -> ValueList.items -> Value ...
        deep = wrapped(wrapped(deep, 0x0A), 0x32)
    with pytest.raises(DecodeError):
        pb.Value.FromString(deep)


def test_idle_streams_are_dropped_and_a_new_client_then_gets_a_session(client_env):
    idle_s = 2.0
    with running_host("--max-sessions", "2", "--idle-timeout-s", str(idle_s), "--allow", "tests.orchestrator") as (
            address, _):
        silent = threading.Event()
        outcomes: list[Any] = []
        with grpc.insecure_channel(address) as channel:
            method = channel.stream_stream(METHOD)
            # taken before the streams open, so that the host's idle clock for each starts after it
            started = time.monotonic()
            readers: list[threading.Thread] = []

            def first_reply(stream: Any) -> None:
                try:
                    outcomes.append(next(stream))
                except grpc.RpcError as exc:
                    outcomes.append((exc.code(), time.monotonic()))

            def open_silent() -> None:
                # sends nothing; the stream's own deadline (120 s) would end it as DEADLINE_EXCEEDED, not CANCELLED
                stream = method(iter(lambda: silent.wait(120), True), timeout=120)
                readers.append(threading.Thread(target=first_reply, args=(stream,), daemon=True))
                readers[-1].start()

            open_silent()
            open_silent()

            # both slots are taken (once the host has both streams): one more is turned away at once, before the
            # idle ones are dropped. A raw request that still finds a free slot is answered and frees it again;
            # a silent stream that arrived while it held the slot was turned away, and is opened again.
            def refused() -> bool:
                for outcome in list(outcomes):
                    if isinstance(outcome, tuple) and outcome[0] == grpc.StatusCode.RESOURCE_EXHAUSTED:
                        outcomes.remove(outcome)
                        open_silent()
                    else:
                        raise AssertionError(f"the idle streams were dropped before both were seen: {outcomes}")
                reply = _send_raw(address, [build_request("next_time").SerializeToString()])
                return isinstance(reply, tuple) and reply[0] == grpc.StatusCode.RESOURCE_EXHAUSTED

            wait_until(refused, "the host to hold both streams")
            for reader in list(readers):
                reader.join(timeout=100)
            silent.set()
        assert [code for code, _ in outcomes] == [grpc.StatusCode.CANCELLED] * 2
        # never before the idle timeout (a lower bound: load only lengthens it; how soon after is not a test)
        assert all(at - started > idle_s - 0.1 for _, at in outcomes), [at - started for _, at in outcomes]
        # the slots are free again; a client that keeps talking (gaps a quarter of the timeout) is not dropped,
        # though it talks for longer than the timeout in all
        session = Session(address)
        assert session.setup(PROBE, {"gain": 2.0})["period_ns"] == 20_000_000
        for _ in range(5):
            time.sleep(idle_s / 4)  # the client's pace, not a synchronisation (tests/test_suite_rules.py)
            assert session.call("next_time") is None
        session.call("finalize")
        session.close()


# -- identity -------------------------------------------------------------------------------------------------
def expect_token_refusals(client_env: pytest.MonkeyPatch, address: str, token: str) -> None:
    """A host that needs ``token`` refuses a client without one, with a wrong one, with a prefix of it and with it
    plus a character, each with the reason in the setup error."""
    for sent, expected in ((None, "UNAUTHENTICATED this host needs a token: set COOPSIM_TOKEN"),
                           ("wrong", "UNAUTHENTICATED wrong token: COOPSIM_TOKEN differs"),
                           (token[:-1], "UNAUTHENTICATED wrong token"), (token + "-", "UNAUTHENTICATED wrong token")):
        if sent is None:
            client_env.delenv("COOPSIM_TOKEN", raising=False)
        else:
            client_env.setenv("COOPSIM_TOKEN", sent)
        session = Session(address)
        with pytest.raises(RemoteError, match=f"the host at {address} failed during 'setup': {expected}"):
            session.setup(PROBE, {})
        session.close()


def test_with_a_token_set_only_clients_with_that_token_get_a_session(client_env):
    with running_host("--allow", "tests.orchestrator", env=_clean_env(COOPSIM_TOKEN="s3cret-token")) as (address,
                                                                                                       _):
        expect_token_refusals(client_env, address, "s3cret-token")
        client_env.setenv("COOPSIM_TOKEN", "s3cret-token")
        session = Session(address)
        assert session.setup(PROBE, {})["period_ns"] == 20_000_000
        session.call("finalize")
        session.close()


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "[::]:0", ":0"])
def test_listening_beyond_loopback_without_a_token_refuses_to_start(listen):
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "host", "--listen", listen], cwd=REPO,
                          env=_clean_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert f"error: listening on {listen} reaches beyond loopback and needs a token: set COOPSIM_TOKEN" in done.stderr
    assert "export COOPSIM_TOKEN=" in done.stderr


def test_loopback_is_told_apart_from_the_network():
    assert all(map(is_loopback, ["127.0.0.1:1", "127.8.0.1:1", "[::1]:1", "localhost:1", "LOCALHOST:1"]))
    assert not any(map(is_loopback, ["0.0.0.0:1", "[::]:1", ":1", "192.168.1.2:1", "example.org:1", "[::ffff:1]:1"]))


def _self_signed(directory: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True)
    return cert, key


@pytest.mark.slow
def test_a_run_over_tls_with_a_token_gives_the_same_digest_as_in_process(tmp_path, client_env):
    cert, key = _self_signed(tmp_path)
    probe = {"name": "probe", "type": PROBE, "params": {"gain": 2.5}}
    with running_host("--allow", "tests.orchestrator", "--tls-cert", str(cert), "--tls-key", str(key),
                      env=_clean_env(COOPSIM_TOKEN="tls-token")) as (address, _):
        client_env.setenv("COOPSIM_TOKEN", "tls-token")
        # without the certificate to trust, no TLS session comes up
        plain = parse_scenario(PLATOON, overrides=[*QUIET, f'federates=[{{name: probe, type: "{PROBE}", '
                                                          f'remote: "{address}", connect_timeout_s: 1}}]'])
        result = run_scenario(plain, tmp_path / "plain")
        assert not result.ok and "a host started with --tls-cert needs COOPSIM_TLS_CA here" in str(result.error)
        client_env.setenv("COOPSIM_TLS_CA", str(cert))
        digests = {}
        for where, remote in (("local", None), ("remote", address)):
            entry = {**probe, **({"remote": remote} if remote else {})}
            scenario = parse_scenario(PLATOON, overrides=[*QUIET, f"federates=[{entry}]".replace("'", '"')])
            run = run_scenario(scenario, tmp_path / where)
            assert run.ok, run.error
            digests[where] = run.run_info["digest"]
        assert digests["local"] == digests["remote"]


# -- stopping -------------------------------------------------------------------------------------------------
def test_sigterm_ends_the_host_without_waiting_for_a_stalled_federate(tmp_path, client_env):
    stall_s = 120.0
    note = tmp_path / "stalled"
    with running_host("--allow", "tests.orchestrator", "--allow-path", str(tmp_path)) as (address, proc):
        session = Session(address, call_timeout_s=stall_s)
        # the probe stalls for 120 s in its step at t = 0, creating `note` first
        session.setup(PROBE, {"stall_at_s": 0.0, "stall_s": stall_s, "stall_note": str(note)})
        session.call("spawn", robots=[])
        state = {"id": np.array([1]), "v": np.array([1.0]), "yaw": np.array([0.0])}
        failed: list[BaseException] = []

        def step() -> None:
            try:
                session.call("step", t_ns=0, inputs={"state": state, "cam_rx": []})
            except RemoteError as exc:
                failed.append(exc)

        caller = threading.Thread(target=step, daemon=True)
        caller.start()
        wait_until(note.exists, "the federate to be stuck in its step")
        assert caller.is_alive()
        os.kill(proc.pid, signal.SIGTERM)
        # ends without waiting for the step: a host that waited would still be running for most of stall_s
        proc.wait(timeout=stall_s / 2)
        caller.join(timeout=stall_s / 2)
        session.close()
    assert proc.returncode is not None and not caller.is_alive()
    assert len(failed) == 1 and "during 'step'" in str(failed[0])


@pytest.mark.parametrize(("options", "message"), [
    (["--tls-cert", "cert.pem"], "error: --tls-cert and --tls-key go together"),
    (["--max-message-mb", "0"], "error: --max-sessions, --max-message-mb and --idle-timeout-s must be positive"),
    (["--allow-broker", "mqtt.example.org"], "error: --allow-broker takes HOST:PORT, got 'mqtt.example.org'"),
])
def test_bad_host_options_are_refused_before_serving(options, message):
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "host", "--listen", "127.0.0.1:0", *options],
                          cwd=REPO, env=_clean_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.strip() == message


def test_the_policy_tells_files_addresses_and_classes_from_plain_values(tmp_path):
    from federates.remote.policy import HostPolicy

    policy = HostPolicy.from_options(allow=["mypkg"], paths=[tmp_path], brokers=["broker.lan:1883", "[::1]:1883"])
    fine = {"topic_prefix": "fleet/a", "mode": "etsi", "path_loss": "dual_slope", "ratio": "3/4",
            "model": "mypkg.sim:Model", "file": str(tmp_path / "a.fmu"), "dirs": [str(tmp_path / "x")],
            "broker": "broker.lan:1883", "host": "BROKER.lan", "url": "mqtt://user@broker.lan:1883/x",
            "v6": "[::1]:1883", "nested": {"rel": "./" + os.path.relpath(tmp_path / "b", Path.cwd())}}
    policy.check_values(fine)
    refused = {"model": "os:system", "file": "a.fmu", "out_dir": str(tmp_path / ".." / "x"),
               "anything": "~/.ssh/id_rsa", "other": "../secrets", "where": "file:///etc/passwd",
               "target": "broker.lan:1884", "host": "10.0.0.1", "endpoint": "http://169.254.169.254/latest",
               "peer": "[::2]:1883", "c": "C:\\Windows\\x"}
    for key, value in refused.items():
        with pytest.raises(PermissionError, match=rf"^parameter 'cfg\.{key}' = "):
            policy.check_values({"cfg": {key: value}})
