"""The real codec beside the model: CAMs encoded for the capture (``v2x.pcap``) and a keyed sample of them decoded
again to check that what the model delivers is what the wire carries.

The model itself never needs the bytes (it delivers ``quantise_si`` values and knows each variant's size); this
part only proves the two agree and writes what Wireshark dissects.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from core.rng import KeyedDraws

from .codec import CamCodec, build_cam, generation_delta_time, read_cam, timestamp_its
from .pcap import BTP_PORT_CAM, PcapWriter, cam_frame
from .platooning import BTP_PORT_PM, PmCodec, build_pm, read_pm, to_wire
from .quantise import to_etsi

_CODEC_CHECK_KEYS = ("latitude", "longitude", "heading", "speed", "drive_direction",
                     "longitudinal_acceleration", "yaw_rate", "curvature")


class CamWire:
    """Encodes sampled and captured CAMs; holds captured frames until they go on air."""

    def __init__(self, cfg: Any, codec_key: int, out_dir: Any, pm_codec_key: int = 0) -> None:
        self.cfg = cfg
        self.codec = CamCodec()
        self._codec_key = codec_key
        self._pm_codec_key = pm_codec_key
        self.pm_codec = PmCodec() if cfg.platooning_message is not None else None
        # PM sizes without / with a maneuver peer (the only variation of its UPER encoding)
        self.pm_bytes = self.pm_codec.sizes() if self.pm_codec is not None else {}
        self.pm_checked = 0
        # Frame sizes from the real encoder, one per variant (with / without the low-frequency container).
        self.cam_bytes = {lf: len(self._encode_dummy(lf)) for lf in (False, True)}
        self._pending: dict[int, tuple[bytes, dict[str, int]]] = {}  # frame serial -> CAM bytes, fields
        self._pcap: PcapWriter | None = None
        if out_dir is not None and cfg.pcap and cfg.pcap_max_frames > 0:
            self._pcap = PcapWriter(Path(out_dir) / "v2x.pcap", start_utc_s=cfg.start_utc_s)
        self._budget = cfg.pcap_max_frames if self._pcap is not None else 0
        self.checked = 0
        self._check_second = -1  # the simulated second the budget of checks belongs to, and what is left of it
        self._check_left = 0

    def _pick(self, key: np.uint64, t_ns: int, stations: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which of the messages generated at ``t_ns`` are encoded: a keyed sample (``codec_sample_rate``, at most
        ``codec_sample_max_per_s`` in each simulated second) that is decoded again, and the first of the run up to the
        capture budget (shared by every message kind).
        Returns the sample mask, the capture mask and the indices of either."""
        n = len(stations)
        rate = self.cfg.codec_sample_rate
        draws = KeyedDraws(key, stations, None, np.full(n, t_ns, np.int64))
        sample = draws.random(n) < rate if rate > 0 else np.zeros(n, bool)
        second = t_ns // 1_000_000_000
        if second != self._check_second:
            self._check_second, self._check_left = second, self.cfg.codec_sample_max_per_s
        picked = np.flatnonzero(sample)
        if len(picked) > self._check_left:  # over the budget: the first ones in station order
            sample[picked[self._check_left:]] = False
        self._check_left -= min(len(picked), self._check_left)
        capture = np.zeros(n, bool)
        if self._budget > 0:
            take = min(self._budget, n)
            capture[:take] = True
            self._budget -= take
        return sample, capture, np.flatnonzero(sample | capture)

    def encode(self, t_ns: int, stations: np.ndarray, frames: np.ndarray, with_lf: np.ndarray,
               si_vals: dict[str, np.ndarray], generated_ns: np.ndarray | None = None) -> None:
        """The CAMs generated at ``t_ns``: a keyed sample is checked, the first ``pcap_max_frames`` of the run are
        kept for the capture. ``generated_ns``: the generation time each CAM claims (a delayed message's is older;
        None: ``t_ns``), in its generationDeltaTime and the GeoNetworking position's time stamp."""
        sample, capture, todo = self._pick(self._codec_key, t_ns, stations)
        if len(todo) == 0:
            return
        etsi = to_etsi({key: val[todo] for key, val in si_vals.items()})
        for j, i in enumerate(todo.tolist()):
            gen_ns = t_ns if generated_ns is None else int(generated_ns[i])
            gdt = generation_delta_time(gen_ns, self.cfg.start_utc_s)
            fields = {key: int(col[j]) for key, col in etsi.items()}
            fields["curvature_calculation_mode"] = 0  # yawRateUsed: curvature = yaw rate / speed
            station = int(stations[i])
            data = self.codec.encode(build_cam(station, self.cfg.station_type, gdt, fields, bool(with_lf[i])))
            if len(data) != self.cam_bytes[bool(with_lf[i])]:
                raise RuntimeError(f"itsg5: CAM of station {station} encodes to {len(data)} bytes, the airtime "
                                   f"assumes {self.cam_bytes[bool(with_lf[i])]}")
            if sample[i]:
                self._check(station, data, fields)
            if capture[i]:
                fields["t_ms"] = int(timestamp_its(round(self.cfg.start_utc_s * 1000) + gen_ns // 1_000_000))
                self._pending[int(frames[i])] = (data, fields | {"station": station})

    def encode_pm(self, t_ns: int, stations: np.ndarray, frames: np.ndarray, si_vals: dict[str, np.ndarray],
                  position: Callable[[np.ndarray], dict[str, np.ndarray]], sizes: np.ndarray) -> None:
        """The PMs generated at ``t_ns`` (``si_vals``: ``platooning.SI_KEYS`` columns; ``position(indices)``: those
        senders' latitude, longitude, speed and heading in ETSI units for the GeoNetworking header; ``sizes``: the
        bytes the airtime assumed): a keyed sample is decoded again, the capture budget is shared with the CAMs."""
        assert self.pm_codec is not None
        sample, capture, todo = self._pick(self._pm_codec_key, t_ns, stations)
        if len(todo) == 0:
            return
        wire = to_wire({key: val[todo] for key, val in si_vals.items()})
        head_of = position(todo)
        gdt = generation_delta_time(t_ns, self.cfg.start_utc_s)
        for j, i in enumerate(todo.tolist()):
            fields = {key: int(col[j]) for key, col in wire.items()}
            station = int(stations[i])
            data = self.pm_codec.encode(build_pm(station, gdt, fields))
            if len(data) != int(sizes[i]):
                raise RuntimeError(f"itsg5: PM of station {station} encodes to {len(data)} bytes, the airtime "
                                   f"assumes {int(sizes[i])}")
            if sample[i]:
                decoded = read_pm(self.pm_codec.decode(data))
                bad = {key: (value, decoded[key]) for key, value in fields.items() if decoded[key] != value}
                if bad:
                    raise RuntimeError(f"itsg5: PM of station {station} decodes differently from its quantised "
                                       f"values: {bad}")
                self.pm_checked += 1
            if capture[i]:
                head = {key: int(head_of[key][j]) for key in ("latitude", "longitude", "speed", "heading")}
                head["t_ms"] = int(timestamp_its(round(self.cfg.start_utc_s * 1000) + t_ns // 1_000_000))
                self._pending[int(frames[i])] = (data, head | {"station": station, "port": BTP_PORT_PM})

    def discard(self, frames: Any) -> None:
        """Frames that will never go on air (replaced in the queue, or their station left)."""
        for frame in frames:
            self._pending.pop(int(frame), None)

    def on_air(self, frames: np.ndarray, starts: np.ndarray) -> None:
        """Frames that started on air: captured ones are written to the pcap at their start time."""
        if not self._pending:
            return
        for frame, start in zip(frames.tolist(), starts.tolist(), strict=True):
            entry = self._pending.pop(frame, None)
            if entry is not None and self._pcap is not None:
                data, f = entry
                self._pcap.write(start, cam_frame(f["station"], f["latitude"], f["longitude"], f["speed"],
                                                  f["heading"], data, f["t_ms"], self.cfg.station_type,
                                                  f.get("port", BTP_PORT_CAM)))

    def close(self) -> None:
        """Close the capture."""
        if self._pcap is not None:
            self._pcap.close()

    def _check(self, station: int, data: bytes, fields: dict[str, int]) -> None:
        """The decoded wire values must equal what the model delivers (``quantise_si`` of the same input)."""
        decoded = read_cam(self.codec.decode(data))
        bad = {key: (fields[key], decoded[key]) for key in _CODEC_CHECK_KEYS if decoded.get(key) != fields[key]}
        if bad:
            raise RuntimeError(f"itsg5: CAM of station {station} decodes differently from its quantised values: {bad}")
        self.checked += 1

    def _encode_dummy(self, low_frequency: bool) -> bytes:
        fields = {"latitude": 0, "longitude": 0, "heading": 0, "speed": 0, "drive_direction": 0,
                  "longitudinal_acceleration": 0, "yaw_rate": 0, "curvature": 0, "curvature_calculation_mode": 0}
        return self.codec.encode(build_cam(0, self.cfg.station_type, 0, fields, low_frequency))
