"""The live view (``coopsim run --live``): a real headless Chromium shows the running robots at the very positions
of the trace, watching never changes a run, an unwatched run pays next to nothing, and tokens keep others out.

Chromium is driven over its DevTools protocol (a websocket), so the test reads the page's DOM while the run goes
and takes the screenshot at that moment."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.cli.main import main
from orchestrator.live import LiveServer, LiveViewError
from orchestrator.live.frames import LinkWindow, frame_message
from orchestrator.live.snapshot import LiveObserver, Mailbox, RosterBook, Snapshot, Watchers
from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

from .processes import stop

websockets_client = pytest.importorskip("websockets.sync.client")

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

SCENARIO = """
version: 1
name: live4
seed: 5
duration_s: {duration}
step_s: 0.01
vehicles: {{count: 4}}
channel: {{type: itsg5}}
outputs: {{plots: false, report: false}}
"""


# -- helpers ---------------------------------------------------------------------------------------------------
def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class DevTools:
    """A minimal client of Chromium's DevTools protocol on one page target."""

    def __init__(self, ws_url: str) -> None:
        self._stack = contextlib.ExitStack()
        self._ws = self._stack.enter_context(websockets_client.connect(ws_url, max_size=None, open_timeout=30))
        self._id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self._ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:  # events in between are not ours
            reply = json.loads(self._ws.recv(timeout=60))
            if reply.get("id") == self._id:
                assert "error" not in reply, reply
                return reply["result"]

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def close(self) -> None:
        self._stack.close()


@contextlib.contextmanager
def chromium(url: str, profile: Path) -> Iterator[DevTools]:
    """Headless Debian Chromium on ``url``, stopped by pid; yields a DevTools client of its page."""
    assert CHROMIUM is not None
    proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                             "--no-first-run", "--hide-scrollbars", "--remote-debugging-port=0",
                             f"--user-data-dir={profile}", "--window-size=1400,900", url],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    devtools = None
    try:
        active = profile / "DevToolsActivePort"  # Chromium writes the port it took here
        deadline = time.monotonic() + 60
        while not (active.exists() and active.read_text().count("\n") >= 1):
            assert proc.poll() is None, "chromium exited"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = int(active.read_text().split()[0])
        targets: list[dict[str, Any]] = []
        while not any(t["type"] == "page" for t in targets):
            assert time.monotonic() < deadline, "chromium shows no page"
            targets = json.loads(_get(f"http://127.0.0.1:{port}/json/list")[1] or b"[]")
            time.sleep(0.1)
        page = next(t for t in targets if t["type"] == "page")
        devtools = DevTools(page["webSocketDebuggerUrl"])
        yield devtools
    finally:
        if devtools is not None:
            with contextlib.suppress(Exception):
                devtools.close()
        stop(proc)


def _trace_rows(run_dir: Path, t_ns: int) -> dict[int, tuple[float, float, float]]:
    table = pq.read_table(run_dir / "trace" / "vehicles.parquet", columns=["t_ns", "robot", "x", "y", "yaw"])
    at = table.filter(np.asarray(table["t_ns"]) == t_ns).to_pydict()
    return {r: (x, y, yaw) for r, x, y, yaw in zip(at["robot"], at["x"], at["y"], at["yaw"], strict=True)}


def _trace_links(run_dir: Path, t_ns: int, window_ns: int) -> list[list[int]]:
    """[sender, receiver, received, lost] from trace/v2x.parquet over (t - window, t]."""
    log = pq.read_table(run_dir / "trace" / "v2x.parquet").to_pydict()
    counts: dict[tuple[int, int], list[int]] = {}
    for t, event, sender, receiver, outcome in zip(log["t_ns"], log["event"], log["sender"], log["receiver"],
                                                   log["outcome"], strict=True):
        if event == "rx" and t_ns - window_ns < t <= t_ns:
            pair = counts.setdefault((sender, receiver), [sender, receiver, 0, 0])
            pair[2 if outcome == "received" else 3] += 1
    counts_list = list(counts.values())
    return sorted(counts_list)


# -- the page in a real browser ---------------------------------------------------------------------------------
@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed (make system-deps)")
def test_chromium_shows_the_running_robots_where_the_trace_has_them(tmp_path):
    scenario = tmp_path / "live4.yaml"
    scenario.write_text(SCENARIO.format(duration=60.0))  # long enough for a slow browser start; stopped early
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("COOPSIM_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(scenario), "--realtime", "1",
                             "--live", "0", "--quiet", "--out", str(run_dir)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("live view: http://127.0.0.1:"), line + (proc.stderr.read() if proc.stderr else "")
        url = line.split(": ", 1)[1].strip()
        with chromium(url, tmp_path / "profile") as page:
            seen: dict[str, Any] = {}
            first_t = None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                seen = page.evaluate("({status: document.body.dataset.status,"
                                     " frame: document.getElementById('frame').textContent,"
                                     " legend: document.getElementById('legend').textContent})") or {}
                frame = json.loads(seen.get("frame") or "null")
                if frame is not None:
                    first_t = first_t if first_t is not None else frame["t_ns"]
                    # a frame at least 1.5 s after the first one seen: its V2X window is entirely watched
                    if frame["t_ns"] - first_t >= 1_500_000_000 and not frame["final"]:
                        break
                time.sleep(0.1)
            else:
                pytest.fail(f"the page showed no running frame: {seen}")
            shot = base64.b64decode(page.call("Page.captureScreenshot", format="png")["data"])
        assert seen["status"] == "live"
        assert all(f"robot{k}" in seen["legend"] for k in range(4))
        # an interrupt ends the run at the next instant with every trace readable up to there (exit code 130)
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=120) == 130, proc.stderr.read() if proc.stderr else ""
    finally:
        stop(proc)
    (tmp_path / "live.png").write_bytes(shot)

    # the page holds the trace's very doubles at that simulation time
    rows = _trace_rows(run_dir, frame["t_ns"])
    assert len(frame["robots"]) == 4 and set(rows) == {r["id"] for r in frame["robots"]}
    for robot in frame["robots"]:
        assert (robot["x"], robot["y"], robot["yaw"]) == rows[robot["id"]], robot
    assert [r["name"] for r in frame["robots"]] == ["robot0", "robot1", "robot2", "robot3"]
    assert rows[1][0] > rows[2][0] > rows[3][0] > rows[4][0]  # a platoon driving along +x, leader first

    # its V2X links are the trace's receptions and losses of the last second, pair by pair
    links = sorted(frame["links"])
    assert links and links == _trace_links(run_dir, frame["t_ns"], 1_000_000_000)

    # the screenshot is a drawn page, not a blank one: many colours, the platoon's hue among them
    from PIL import Image

    image = np.asarray(Image.open(io.BytesIO(shot)).convert("RGB")).astype(int)
    assert image.shape[0] >= 700 and image.shape[1] >= 1300
    colours = len(np.unique(image.reshape(-1, 3) @ np.array([1, 256, 65536])))
    assert colours > 200, colours
    background = np.all(image == image[-1, -1], axis=2).mean()
    assert background < 0.8, background
    bluish = (image[..., 2] > image[..., 0] + 60) & (image[..., 2] > image[..., 1] + 20)
    assert bluish.sum() > 200  # platoon 0 is drawn in blue


# -- watching never changes a run, and an unwatched one pays next to nothing -----------------------------------
def _digest(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run_dir / "trace").glob("*.parquet"))}


def test_traces_are_bit_identical_with_and_without_a_watched_live_view(tmp_path):
    scenario = parse_scenario(SCENARIO.format(duration=3.0))
    plain = run_scenario(scenario, tmp_path / "plain")
    with LiveServer("127.0.0.1", 0) as server:
        unwatched = run_scenario(scenario, tmp_path / "unwatched", extra_observers=[server.observer()])
    frames: list[dict[str, Any]] = []
    with LiveServer("127.0.0.1", 0, rate_hz=1000.0) as server:
        ws_url = server.url.replace("http://", "ws://") + "ws"
        with websockets_client.connect(ws_url) as viewer:
            def read() -> None:
                with contextlib.suppress(Exception):
                    while True:
                        frames.append(json.loads(viewer.recv(timeout=30)))

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            deadline = time.monotonic() + 10
            while server.watchers.count < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            observer = server.observer()
            watched = run_scenario(scenario, tmp_path / "watched", extra_observers=[observer])
            server.close()
        reader.join(timeout=10)
    assert plain.ok and unwatched.ok and watched.ok
    assert observer.snapshots > 10  # it really watched, many times
    assert [m for m in frames if m["type"] == "frame"][-1]["final"]
    reference = _digest(tmp_path / "plain")
    assert reference and _digest(tmp_path / "unwatched") == reference
    assert _digest(tmp_path / "watched") == reference
    assert plain.run_info["digest"] == unwatched.run_info["digest"] == watched.run_info["digest"]


def test_an_unwatched_live_view_costs_under_one_percent_of_an_instant(tmp_path):
    scenario = parse_scenario(SCENARIO.format(duration=3.0).replace("itsg5", "ideal"))
    result = run_scenario(scenario, tmp_path / "run")
    per_instant_s = result.run_info["wall_time_s"] / result.run_info["steps"]
    observer = LiveObserver(Mailbox(10**9), Watchers(), RosterBook())
    bus = {"state": {"id": np.arange(4)}}
    stepped = ("physics", "control")
    calls = 200_000
    best = float("inf")
    for _ in range(3):  # the best of three: a loaded machine only makes it slower
        started = time.perf_counter()
        for t in range(calls):
            observer.on_instant(t, bus, stepped)
        best = min(best, (time.perf_counter() - started) / calls)
    assert observer.snapshots == 0
    assert best < 0.01 * per_instant_s, (best, per_instant_s)


def test_snapshots_are_rate_bounded_latest_wins_and_keep_the_v2x_window():
    clock = [0.0]
    mailbox, watchers = Mailbox(window_ns=1_000_000_000), Watchers()
    observer = LiveObserver(mailbox, watchers, RosterBook(), rate_hz=16.0, clock=lambda: clock[0])
    watchers.joined()
    logs = []
    for k in range(300):  # 3 s of 10 ms instants, 1/128 s of wall time each: a snapshot every 8 instants
        log = {"t_ns": np.array([k * 10**7]), "event": np.array([1], np.uint8), "sender": np.array([1]),
               "receiver": np.array([2]), "outcome": np.array([k % 2], np.uint8)}
        logs.append(log)
        observer.on_instant(k * 10**7, {"state": {"id": np.arange(2)}, "v2x": log}, ("physics",))
        clock[0] += 1 / 128
    assert observer.snapshots == 38  # 2.34 s of wall time at 16 Hz, not 300
    snap = mailbox.take(timeout=0)
    assert snap is not None and snap.t_ns == 2_960_000_000  # the newest; every older one was replaced
    assert mailbox.take(timeout=0) is None
    # the replaced snapshots' V2X values within the last second came along: publications after 1.96 s
    assert [t for t, _ in snap.v2x] == [k * 10**7 for k in range(197, 297)]
    assert all(value is logs[t // 10**7] for t, value in snap.v2x)  # references, never copies


def test_link_window_counts_received_and_lost_per_pair():
    window = LinkWindow(window_ns=1000)
    log = {"t_ns": np.array([100, 200, 300, 400, 500, 900]), "event": np.array([0, 1, 1, 1, 1, 1], np.uint8),
           "sender": np.array([1, 1, 1, 2, 1, 2]), "receiver": np.array([-1, 2, 2, 3, 3, 3]),
           "outcome": np.array([0, 1, 3, 1, 2, 1], np.uint8)}  # sent, received, collision, received, ...
    window.add([(900, log)])
    assert window.counts(1000) == [[1, 2, 1, 1], [1, 3, 0, 1], [2, 3, 2, 0]]
    assert window.counts(1350) == [[1, 3, 0, 1], [2, 3, 2, 0]]  # rows at or before 350 left the window
    assert window.counts(5000) == []


def test_a_final_frame_reaches_a_viewer_that_connects_after_the_run():
    snap = Snapshot(7, 7, {"id": np.array([3]), "x": np.array([0.1]), "y": np.array([0.2]), "yaw": np.array([0.0]),
                           "v": np.array([1.5])}, final=True)
    with LiveServer("127.0.0.1", 0) as server:
        server.mailbox.put(snap)
        with websockets_client.connect(server.url.replace("http://", "ws://") + "ws") as viewer:
            roster = json.loads(viewer.recv(timeout=10))
            frame = json.loads(viewer.recv(timeout=10))
    assert roster == {"type": "roster", "version": 0, "robots": []}
    assert frame["type"] == "frame" and frame["final"] and frame["x"] == [0.1] and frame["gap"] == [None]


# -- who may look -----------------------------------------------------------------------------------------------
def test_beyond_loopback_without_a_token_refuses_to_start(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("COOPSIM_TOKEN", raising=False)
    with pytest.raises(LiveViewError, match="needs a token"):
        LiveServer("0.0.0.0", 0)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO.format(duration=1.0))
    code = main(["run", str(scenario), "--quiet", "--live", "0", "--live-host", "0.0.0.0", "--out",
                 str(tmp_path / "run")])
    assert code == 2
    assert "COOPSIM_TOKEN" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused before anything ran


def test_live_port_must_be_a_port(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(tmp_path / "s.yaml"), "--live", "70000"])
    assert exit_info.value.code == 2 and "must be in 0 .. 65535" in capsys.readouterr().err


def test_a_token_guards_the_page_and_the_websocket():
    with LiveServer("127.0.0.1", 0, token="s3cret/+") as server:
        base = f"http://127.0.0.1:{server.port}/"
        assert server.url == base + "?token=s3cret%2F%2B"
        assert _get(base)[0] == 401
        assert _get(base + "?token=wrong")[0] == 403
        status, body = _get(server.url)
        assert status == 200 and b"<canvas id=\"top\">" in body
        with pytest.raises(Exception, match="401"):
            websockets_client.connect(base.replace("http://", "ws://") + "ws", open_timeout=10)
        with pytest.raises(Exception, match="403"):
            websockets_client.connect(base.replace("http://", "ws://") + "ws?token=nope", open_timeout=10)
        with websockets_client.connect(server.url.replace("http://", "ws://").replace("/?", "/ws?"),
                                       open_timeout=10):
            deadline = time.monotonic() + 10
            while server.watchers.count < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert server.watchers.watched


def test_loopback_answers_only_to_loopback_hosts_and_its_own_origin():
    with LiveServer("127.0.0.1", 0) as server:
        base = f"http://127.0.0.1:{server.port}/"
        assert _get(base)[0] == 200
        assert _get(base, {"Host": f"localhost:{server.port}"})[0] == 200
        assert _get(base, {"Host": f"attacker.example:{server.port}"})[0] == 403  # DNS rebinding
        ws = base.replace("http://", "ws://") + "ws"
        with pytest.raises(Exception, match="403"):
            websockets_client.connect(ws, origin="http://attacker.example", open_timeout=10)
        with websockets_client.connect(ws, origin=f"http://127.0.0.1:{server.port}", open_timeout=10):
            pass
        assert _get(base + "nothing-here")[0] == 404


def test_a_state_that_is_not_finite_becomes_null_not_a_dead_view():
    snap = Snapshot(1, 2, {"id": np.array([1, 2]), "x": np.array([0.5, np.nan]), "y": np.array([1.0, 2.0]),
                           "yaw": np.zeros(2), "v": np.array([np.inf, 1.0])})
    frame = json.loads(frame_message(snap, {2: 1}, LinkWindow(10)))
    assert frame["x"] == [0.5, None] and frame["v"] == [None, 1.0] and frame["gap"] == [None, None]
