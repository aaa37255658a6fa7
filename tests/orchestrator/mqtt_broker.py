"""A real mosquitto broker for tests: on a free loopback port, optionally with a password file (mosquitto_passwd)
or TLS (a throw-away CA and server certificate made with openssl); started and stopped by pid, restartable on the
same port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from .processes import free_port, stop

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"


def wait_listening(port: int, timeout_s: float = 20.0) -> None:
    """Until something accepts TCP connections on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


def make_certificates(where: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, both signed by it (PEM files in
    ``where``)."""
    where.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (where / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem"))
    ext = where / "san.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "2",
            "-subj", "/CN=coopsim test CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-out",
            str(cert), "-days", "2", "-extfile", str(ext))
    client_key, client_csr, client_cert = (where / n for n in ("client.key", "client.csr", "client.pem"))
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(client_key), "-out", str(client_csr), "-subj",
            "/CN=coopsim bridge")
    openssl("x509", "-req", "-in", str(client_csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
            "-out", str(client_cert), "-days", "2")
    return {"ca": ca, "cert": cert, "key": key, "client_cert": client_cert, "client_key": client_key}


class Broker:
    """mosquitto on ``port`` (a free one by default) with the given extra configuration lines."""

    def __init__(self, workdir: Path, users: dict[str, str] | None = None, tls: dict[str, Path] | None = None,
                 port: int | None = None, require_certificate: bool = False) -> None:
        self.port = port or free_port()
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        lines = [f"listener {self.port} 127.0.0.1"]
        if os.geteuid() == 0:  # as root it would switch to user mosquitto, which cannot read pytest's private tmp
            lines.append("user root")
        if users:
            passwd = workdir / "passwd"
            for i, (user, password) in enumerate(users.items()):
                subprocess.run([MOSQUITTO_PASSWD, "-b", *(["-c"] if i == 0 else []), str(passwd), user, password],
                               check=True, capture_output=True)
            lines += ["allow_anonymous false", f"password_file {passwd}"]
        else:
            lines.append("allow_anonymous true")
        lines.append("max_queued_messages 100000")  # the fuzz test sends 1,020 at once: none may be dropped
        lines.append("set_tcp_nodelay true")  # as docs/bridges.md advises for lock-step: no 40 ms Nagle waits
        if tls:
            lines += [f"cafile {tls['ca']}", f"certfile {tls['cert']}", f"keyfile {tls['key']}"]
            if require_certificate:  # clients must show a certificate signed by the CA
                lines.append("require_certificate true")
        self.config = workdir / "mosquitto.conf"
        self.config.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen | None = None

    def start(self) -> Broker:
        """Start it and wait until it listens."""
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.config)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_listening(self.port)
        return self

    def stop(self) -> None:
        """Stop it by pid (SIGTERM, then SIGKILL)."""
        if self.proc is not None:
            stop(self.proc)
            self.proc = None

    def kill(self) -> None:
        """Kill it at once (SIGKILL): the broker vanishes as in a crash."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
