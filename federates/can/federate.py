"""The CAN bridge federate: state frames out every period, command frames in, a bus log in the run directory."""

from __future__ import annotations

import math
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, Input, PortData, SetupContext
from core.params import parse_params
from core.ports import ESTIMATE, RANGE, STATE, command_port, fields_of
from core.robots import RobotSpec
from core.timebase import NS_PER_S, seconds_to_ns

from .codec import COMMAND_BASE, FRAME_ID_MASK, MAX_SLOT, Codec, Command
from .e2e import counter_step, next_counter
from .params import CanParams
from .tally import LOG, Tally

WORST_CASE_FRAME_BITS = 135
"""Bits on the wire of a classic frame with an 11-bit id and 8 data bytes, worst-case bit stuffing included:
34 + 8*8 + 13 + floor((34 + 8*8 - 1) / 4) (Davis, Burns, Bril, Lukkien, "Controller Area Network (CAN)
schedulability analysis: refuted, revisited and revised", Real-Time Systems 35, 2007, eq. 1)."""
_RESEND_S = 0.5  # lock-step: a period's state frames go out again after this long without all answers
_ECHO_WINDOW = 4096  # sent frames remembered to recognise their echo (udp_multicast loops a sender's frames back)
_UNREADABLE = object()  # queued by the receiver when the interface could not turn input into a frame


class LockstepTimeoutError(RuntimeError):
    """A lock-step period's commands did not all arrive in time."""


class CanBridge(Federate):
    """Robots on a CAN bus (``docs/bridges.md``, CAN): per robot ``VehicleState`` and ``VehicleSteerGap`` every
    ``period_s``; ``Command`` frames drive the robots the scenario gives to this bridge."""

    Params = CanParams

    def __init__(self, name: str, interface: str = "virtual", channel: str | None = None, bitrate: int = 500_000,
                 bus_options: Mapping[str, Any] | None = None, period_s: float = 0.02, mode: str = "free",
                 lockstep_timeout_s: float = 10.0, log: str = "asc", state_port: str = "state") -> None:
        super().__init__(name)
        given = {k: v for k, v in locals().items() if k not in ("self", "name", "__class__")}
        given["bus_options"] = dict(bus_options or {})
        self.params: CanParams = parse_params(CanParams, given, "can bridge")
        self.period_ns = seconds_to_ns(self.params.period_s)
        self.lockstep = self.params.mode == "lockstep"
        self.codec = Codec()
        self.tally = Tally(name)
        self._port = command_port(name).name
        self._bus: Any = None
        self._writer: Any = None
        self.log_path: Path | None = None
        self._inbox: queue.Queue = queue.Queue(maxsize=100_000)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._slots: dict[int, str] = {}  # robot id (= slot) -> name, in spawn order
        self._driven: dict[int, str] = {}  # the robots this bridge commands, in spawn order
        self._last_counter: dict[int, int] = {}  # free mode: counter of each robot's last checked command
        self._counter = 0  # of the period being sent
        self._t_s = 0.0
        self.tx_frames = 0
        self.rx_frames = 0
        self.commands = 0
        """Commands applied (rows of the command port)."""
        self.superseded = 0
        """Free mode: valid commands replaced by a newer one of the same robot within one period."""
        self.overflow = 0
        self.resent = 0
        self.round_trips_s: list[float] = []
        self._peak_frames = 0
        self._echo: Counter = Counter()
        self._echo_order: deque = deque()
        self.echoes = 0
        """Own frames the interface delivered back (udp_multicast does); neither logged twice nor counted."""

    # -- set-up ------------------------------------------------------------------------------------------------------
    def setup(self, ctx: SetupContext) -> FederateMeta:
        try:
            import can
        except ImportError:
            raise RuntimeError("the CAN bridge needs python-can and cantools: pip install 'coopsim[can]'") from None
        p = self.params
        channel = p.channel if p.channel is not None else ("coopsim" if p.interface == "virtual" else None)
        options: dict[str, Any] = {"bitrate": p.bitrate, **p.bus_options}
        if channel is not None:
            options["channel"] = channel
        try:
            self._bus = can.Bus(interface=p.interface, receive_own_messages=False, **options)
        except Exception as exc:
            raise RuntimeError(f"CAN bridge '{self.name}': cannot open the {p.interface} bus "
                               f"(channel {channel!r}): {type(exc).__name__}: {exc}") from None
        if ctx.out_dir is not None and p.log != "none":
            self.log_path = Path(ctx.out_dir) / "can" / f"{self.name}.{p.log}"
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = (can.ASCWriter if p.log == "asc" else can.BLFWriter)(str(self.log_path))
        self._thread = threading.Thread(target=self._receive, name=f"{self.name}-can-rx", daemon=True)
        self._thread.start()
        port = STATE if p.state_port == "state" else ESTIMATE
        inputs = (Input(port.name, fields=fields_of(port, ("v", "a", "yaw_rate", "steer"))),
                  Input("range", fields=fields_of(RANGE, ("range_m", "range_rate_mps", "target")), optional=True))
        return FederateMeta(inputs=inputs, outputs=(command_port(self.name),), period_ns=self.period_ns)

    def _receive(self) -> None:
        """Receiver thread: frames into the inbox; the step takes them, so they act at the next period."""
        while not self._stop.is_set():
            try:
                msg = self._bus.recv(0.05)
            except Exception:  # e.g. a datagram that is no frame on udp_multicast: count it, keep listening
                if self._stop.is_set():
                    return
                msg = _UNREADABLE
                time.sleep(0.001)
            if msg is not None:
                try:
                    self._inbox.put_nowait(msg)
                except queue.Full:
                    self.overflow += 1

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        for robot in robots:
            if not 0 <= robot.id <= MAX_SLOT:
                raise ValueError(f"robot '{robot.name}': station id {robot.id} has no CAN slot (the bus layout gives "
                                 f"robots 0-{MAX_SLOT} ids base + station id); give it a smaller id")
            self._slots[robot.id] = robot.name
            if robot.driven_by(self.name):
                self._driven[robot.id] = robot.name
        frames = 2 * len(self._slots) + len(self._driven)
        if frames > self._peak_frames:
            self._peak_frames = frames
            load = self._bus_load(frames)
            if load > 1.0:  # a real bus could not carry it; python-can's virtual and udp buses do not care
                LOG.warning("CAN bridge '%s': %d frames per %g s period need %.0f %% of %d bit/s in the worst case",
                            self.name, frames, self.params.period_s, load * 100, self.params.bitrate)

    def _bus_load(self, frames: int) -> float:
        """Worst-case share of the bitrate that ``frames`` frames per period take."""
        return frames * WORST_CASE_FRAME_BITS / (self.params.bitrate * self.params.period_s)

    def despawn(self, robot_ids: Sequence[int]) -> None:
        for rid in map(int, robot_ids):
            self._slots.pop(rid, None)
            self._driven.pop(rid, None)
            self._last_counter.pop(rid, None)

    # -- stepping ----------------------------------------------------------------------------------------------------
    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        self._t_s = t_ns / NS_PER_S
        counter = self._counter
        taken: dict[int, Command] = {}
        self._take(taken, counter)  # first: what arrived before this period acts now, any answer to it next period
        frames = self._state_frames(inputs, counter)
        sent = time.monotonic()
        self._send(frames)
        if self.lockstep and self._driven:
            self._wait(taken, counter, t_ns, frames)
            self.round_trips_s.append(time.monotonic() - sent)
        self._counter = next_counter(counter)
        rows = [rid for rid in self._driven if rid in taken]  # spawn order: the same table on every rerun
        self.commands += len(rows)
        return {self._port: {"robot": np.asarray(rows, np.int64),
                             "speed": np.array([taken[r].speed for r in rows], np.float64),
                             "accel": np.array([taken[r].accel for r in rows], np.float64),
                             "steer": np.array([taken[r].steer for r in rows], np.float64),
                             "yaw_rate": np.full(len(rows), np.nan)}}

    def _state_frames(self, inputs: Mapping[str, PortData], counter: int) -> list[tuple[int, bytes]]:
        state = inputs.get(self.params.state_port)
        if state is None or state.get("id") is None:
            return []
        ids = np.asarray(state["id"]).tolist()
        v, a, w, steer = (np.asarray(state[k], np.float64).tolist() for k in ("v", "a", "yaw_rate", "steer"))
        gap = {}
        rng = inputs.get("range")
        if rng is not None and rng.get("id") is not None:
            for rid, dist, rate, target in zip(np.asarray(rng["id"]).tolist(), np.asarray(rng["range_m"]).tolist(),
                                               np.asarray(rng["range_rate_mps"]).tolist(),
                                               np.asarray(rng["target"]).tolist(), strict=True):
                seen = target >= 0 and math.isfinite(dist)
                gap[rid] = (dist, rate if math.isfinite(rate) else math.nan) if seen else (math.nan, math.nan)
        codec, frames = self.codec, []
        for row, rid in enumerate(ids):
            if rid not in self._slots:
                continue
            frames.append(codec.encode(codec.state, rid, {"Speed": v[row], "Acceleration": a[row],
                                                          "YawRate": w[row]}, counter))
            dist, rate = gap.get(rid, (math.nan, math.nan))
            frames.append(codec.encode(codec.steer_gap, rid, {"SteeringAngle": steer[row], "Gap": dist,
                                                              "GapRate": rate}, counter))
        return frames

    def _send(self, frames: list[tuple[int, bytes]]) -> None:
        import can

        for frame_id, payload in frames:
            msg = can.Message(timestamp=self._t_s, arbitration_id=frame_id, data=payload, is_extended_id=False,
                              is_rx=False)
            self._bus.send(msg)
            key = (frame_id, payload)
            self._echo[key] += 1
            self._echo_order.append(key)
            if len(self._echo_order) > _ECHO_WINDOW:
                old = self._echo_order.popleft()
                if self._echo.get(old):
                    self._echo[old] -= 1
                    if not self._echo[old]:
                        del self._echo[old]
            if self._writer is not None:
                self._writer.on_message_received(msg)
        self.tx_frames += len(frames)

    def _take(self, taken: dict[int, Command], counter: int | None) -> None:
        """Check every frame waiting in the inbox; valid commands go into ``taken`` (the newest per robot)."""
        while True:
            try:
                msg = self._inbox.get_nowait()
            except queue.Empty:
                return
            self._check(msg, taken, counter)

    def _wait(self, taken: dict[int, Command], counter: int, t_ns: int, frames: list[tuple[int, bytes]]) -> None:
        """Lock-step: until every driven robot answered this period (its command echoing ``counter``)."""
        timeout = self.params.lockstep_timeout_s
        start = time.monotonic()
        resend = start + _RESEND_S
        while not self._driven.keys() <= taken.keys():
            now = time.monotonic()
            if now - start >= timeout:
                missing = ", ".join(f"'{self._driven[r]}' (Command id 0x{COMMAND_BASE + r:03X})"
                                    for r in self._driven if r not in taken)
                raise LockstepTimeoutError(
                    f"lock-step: no valid Command with Counter = {counter} for t = {t_ns / 1e9:.6f} s from {missing} "
                    f"within lockstep_timeout_s = {timeout:g} s (ignored so far: {self.tally.counts or 'none'})")
            if now >= resend:  # a frame lost on a datagram bus must not stall the run until the timeout
                self._send(frames)
                self.resent += 1
                resend = now + _RESEND_S
            try:
                msg = self._inbox.get(timeout=min(0.05, max(0.0, timeout - (now - start))))
            except queue.Empty:
                continue
            self._check(msg, taken, counter)

    def _check(self, msg: Any, taken: dict[int, Command], counter: int | None) -> None:
        """Check one received frame; a valid command goes into ``taken``, anything else is counted."""
        if msg is _UNREADABLE:
            self.tally.drop("unreadable", -1, b"")
            return
        data = bytes(msg.data or b"")
        frame_id = int(msg.arbitration_id)
        if self._echo.get((frame_id, data)):
            self._echo[(frame_id, data)] -= 1
            if not self._echo[(frame_id, data)]:
                del self._echo[(frame_id, data)]
            self.echoes += 1
            return
        self.rx_frames += 1
        if self._writer is not None:
            msg.timestamp, msg.is_rx = self._t_s, True  # the log shows simulation time, at the period that took it
            self._writer.on_message_received(msg)
        if msg.is_error_frame or msg.is_remote_frame:
            return self.tally.drop("not_data", frame_id, data)
        if msg.is_extended_id or msg.is_fd or frame_id & FRAME_ID_MASK != COMMAND_BASE:
            return self.tally.drop("unknown_id", frame_id, data)
        slot = frame_id & MAX_SLOT
        if slot not in self._driven:
            return self.tally.drop("not_driven", frame_id, data)
        reason, raw = self.codec.check_command(frame_id, data)
        if reason is not None or raw is None:
            return self.tally.drop(reason or "bad_length", frame_id, data)
        got = int(raw["Counter"])
        if self.lockstep:
            if counter is None or got != counter:
                return self.tally.drop("counter_mismatch", frame_id, data)  # an answer to another period
            if slot in taken:
                return self.tally.drop("duplicate", frame_id, data)  # the first answer of a period counts
        else:
            last = self._last_counter.get(slot)
            if last is not None and counter_step(last, got) == 0:
                return self.tally.drop("counter_repeat", frame_id, data)
            self._last_counter[slot] = got  # after a jump the sender is followed from its new counter
            if last is not None and counter_step(last, got) != 1:
                return self.tally.drop("counter_jump", frame_id, data)
        command = self.codec.command_of(raw)
        if command is None:
            return self.tally.drop("out_of_range", frame_id, data)
        if math.isnan(command.speed) and math.isnan(command.accel) and math.isnan(command.steer):
            return self.tally.drop("nothing_given", frame_id, data)
        if slot in taken:
            self.superseded += 1
        taken[slot] = command

    # -- end ---------------------------------------------------------------------------------------------------------
    def run_summary(self) -> dict[str, Any]:
        """Counts for ``run.json``: frames sent and received, commands applied, frames ignored by reason."""
        p = self.params
        out: dict[str, Any] = {
            "interface": p.interface, "mode": p.mode, "tx_frames": self.tx_frames, "rx_frames": self.rx_frames,
            "commands": self.commands, "ignored": dict(sorted(self.tally.counts.items())),
            "ignored_total": sum(self.tally.counts.values()),
            "bus_load_worst_case": round(self._bus_load(self._peak_frames), 4),
        }
        if self.echoes:
            out["own_frames_echoed"] = self.echoes
        if self.overflow:
            out["inbox_overflow"] = self.overflow
        if self.lockstep:
            trips = np.asarray(self.round_trips_s)
            out["lockstep"] = {"periods": len(trips), "resent": self.resent,
                               "round_trip_p50_s": float(np.percentile(trips, 50)) if len(trips) else None,
                               "round_trip_p99_s": float(np.percentile(trips, 99)) if len(trips) else None}
        else:
            out["superseded"] = self.superseded
        if self.log_path is not None:
            out["log"] = f"can/{self.log_path.name}"
        return out

    def finalize(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._bus is not None:
            self._take({}, None)  # frames that came after the last period: counted and logged, not applied
            self._bus.shutdown()
            self._bus = None
        if self._writer is not None:
            self._writer.stop()
            self._writer = None
