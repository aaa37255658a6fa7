"""A python-can ``udp_multicast`` bus that stays on this host, for the CAN tests, benchmarks and docs.

An IPv6 multicast group of interface-local scope (``ff11::/16``: flags 1 "transient", scope 1 "interface-local",
RFC 4291 section 2.7) is looped back to every socket of this host that joined it, and Linux never puts such a
packet on a wire (``ip6_finish_output2`` drops interface-local multicast on non-loopback devices after the local
copy). So no route, no root and no kernel module is needed where the host has any IPv6 multicast route (the
kernel adds ``ff00::/8`` for every multicast-capable interface). A host with only ``lo`` has none; as root the
tests then add one to ``lo`` (and remove it afterwards).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator

import can

GROUP = "ff11::c0:5e"
"""The tests' interface-local multicast group (the CAN "channel")."""


def free_udp_port() -> int:
    """A UDP port nothing is bound to right now."""
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        s.bind(("::1", 0))
        return s.getsockname()[1]


def loops_back(port: int) -> bool:
    """Whether a frame sent on the group reaches another bus on it, in this process."""
    try:
        rx = can.Bus(interface="udp_multicast", channel=GROUP, port=port)
    except Exception:
        return False
    try:
        tx = can.Bus(interface="udp_multicast", channel=GROUP, port=port)
        try:
            tx.send(can.Message(arbitration_id=0x7FF, data=b"probe", is_extended_id=False))
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                msg = rx.recv(0.2)
                if msg is not None and msg.arbitration_id == 0x7FF:
                    return True
            return False
        except Exception:
            return False
        finally:
            tx.shutdown()
    finally:
        rx.shutdown()


@contextlib.contextmanager
def multicast_on_this_host() -> Iterator[int]:
    """A UDP port for ``udp_multicast`` on ``GROUP``; adds a multicast route to ``lo`` only if none exists (root)."""
    port = free_udp_port()
    added = []
    if not loops_back(port):
        if os.geteuid() != 0:
            import pytest

            pytest.skip("no IPv6 multicast route on this host; as root: ip link set lo multicast on && "
                        "ip -6 route add multicast ff11::/16 dev lo table local")
        for cmd, undo in ((["ip", "link", "set", "lo", "multicast", "on"], None),
                          (["ip", "-6", "route", "add", "multicast", "ff11::/16", "dev", "lo", "table", "local"],
                           ["ip", "-6", "route", "del", "multicast", "ff11::/16", "dev", "lo", "table", "local"])):
            if subprocess.run(cmd, capture_output=True).returncode == 0 and undo:
                added.append(undo)
        assert loops_back(port), "udp_multicast does not loop back on this host even with a route on lo"
    try:
        yield port
    finally:
        for undo in added:
            subprocess.run(undo, capture_output=True)
