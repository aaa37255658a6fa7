"""The real codec beside the model: CAMs encoded for the capture (``v2x.pcap``) and a keyed sample of them decoded
again to check that what the model delivers is what the wire carries.

The model itself never needs the bytes (it delivers ``quantise_si`` values and knows each variant's size); this
part only proves the two agree and writes what Wireshark dissects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.core.rng import KeyedDraws

from .codec import CamCodec, build_cam, generation_delta_time, read_cam, timestamp_its
from .pcap import PcapWriter, cam_frame
from .quantise import to_etsi

_CODEC_CHECK_KEYS = ("latitude", "longitude", "heading", "speed", "drive_direction",
                     "longitudinal_acceleration", "yaw_rate", "curvature")


class CamWire:
    """Encodes sampled and captured CAMs; holds captured frames until they go on air."""

    def __init__(self, cfg: Any, codec_key: int, out_dir: Any) -> None:
        self.cfg = cfg
        self.codec = CamCodec()
        self._codec_key = codec_key
        # Frame sizes from the real encoder, one per variant (with / without the low-frequency container).
        self.cam_bytes = {lf: len(self._encode_dummy(lf)) for lf in (False, True)}
        self._pending: dict[int, tuple[bytes, dict[str, int]]] = {}  # frame serial -> CAM bytes, fields
        self._pcap: PcapWriter | None = None
        if out_dir is not None and cfg.pcap and cfg.pcap_max_frames > 0:
            self._pcap = PcapWriter(Path(out_dir) / "v2x.pcap", start_utc_s=cfg.start_utc_s)
        self._budget = cfg.pcap_max_frames if self._pcap is not None else 0
        self.checked = 0

    def encode(self, t_ns: int, stations: np.ndarray, frames: np.ndarray, with_lf: np.ndarray,
               si_vals: dict[str, np.ndarray]) -> None:
        """The CAMs generated at ``t_ns``: a keyed sample is checked, the first ``pcap_max_frames`` of the run are
        kept for the capture."""
        n = len(stations)
        rate = self.cfg.codec_sample_rate
        codec_draws = KeyedDraws(self._codec_key, stations, None, np.full(n, t_ns, np.int64))
        sample = codec_draws.random(n) < rate if rate > 0 else np.zeros(n, bool)
        capture = np.zeros(n, bool)
        if self._budget > 0:
            take = min(self._budget, n)
            capture[:take] = True
            self._budget -= take
        todo = np.flatnonzero(sample | capture)
        if len(todo) == 0:
            return
        etsi = to_etsi({key: val[todo] for key, val in si_vals.items()})
        gdt = generation_delta_time(t_ns, self.cfg.start_utc_s)
        for j, i in enumerate(todo.tolist()):
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
                fields["t_ms"] = int(timestamp_its(round(self.cfg.start_utc_s * 1000) + t_ns // 1_000_000))
                self._pending[int(frames[i])] = (data, fields | {"station": station})

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
                                                  f["heading"], data, f["t_ms"], self.cfg.station_type))

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
