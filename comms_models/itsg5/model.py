"""The ETSI ITS-G5 channel model: CA basic service, 802.11p access, propagation, interference and DCC.

The channel composes a medium (``medium.Medium``: stations, queues, propagation, access and interference), the CA
basic service (``ca_service.CaService``), the optional PM service (``pm_service.PmService``), the receptions
waiting for their time (``receiving.Receptions``), DCC, the log and the wire (codec check and capture).

Per channel step (``step(t_ns, estimate, interest)``):

1. The shared medium advances from the previous step to ``t_ns`` (``Medium.advance``): queued frames contend
   (EDCA best effort), start, are received or lost at every station within the cut-off radius, and the busy time
   of each station is accumulated into 100 ms CBR windows. Frames still on air, and receptions still in the
   receivers' processing, carry over to later steps.
2. Each closed CBR window updates DCC (``dcc.Dcc``), which sets ``T_GenCam_DCC`` (etsi mode) or acts as a
   gatekeeper dropping CAMs closer than ``T_off`` to the previous one (fixed_rate mode).
3. The CA basic service checks its rules (``generation.CamGeneration``); a generated CAM carries what the
   vehicle believes (``estimate``), converted to WGS84 and quantised exactly as the codec would
   (``quantise.quantise_si``), and enters the MAC queue after the transmit processing delay.
4. With ``platooning_message`` set, each station also sends a platooning message (PM, ``platooning.asn``) every
   ``1 / rate_hz`` through the same queue, medium and DCC (``pm_service``); receptions of PMs fill the deliveries'
   ``u_des`` and platooning columns (``pm.PmReceptions``).
5. Receptions whose receiver-side processing completes by ``t_ns`` are returned.

A station is a robot (station id = robot id). Every random draw is keyed by the event it belongs to
(``core.rng.keyed_u01`` / ``KeyedDraws`` with ``purpose_key(seed, "v2x", purpose)``): fading and shadowing
by (sender, receiver, generation time), backoff, transmit delay and the codec sample by (sender, generation time),
receive delay by (sender, receiver, generation time); each station's start offset by its robot id. The same seed
gives bit-identical results, and a station that joins never changes the draws of the others' links. A PM's draws
use the same events under their own purposes ("pm_radio", "pm_mac", ...), so a CAM and a PM generated at the same
instant are independent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from core.ports import V2X_LOG
from core.rng import purpose_key, stream
from core.robots import RobotSpec

from ..attacks.plan import AttackPlan, with_attack_column
from ..base import CommsModel, Deliveries, Interest
from .ca_service import CaService
from .dcc import Dcc
from .geo import LocalProjection
from .log import ChannelLog
from .medium import Medium
from .params import ItsG5Params
from .pm_service import PmService
from .receiving import Receptions
from .wire import CamWire


class ItsG5Channel(CommsModel):
    """ETSI ITS-G5 CAM exchange over a shared 802.11p channel (see the module docstring)."""

    Params: ClassVar[type[ItsG5Params]] = ItsG5Params
    logs_every_transmission: ClassVar[bool] = True  # its log has a "tx" row for every CAM generated

    def __init__(self, params: Mapping[str, Any], seed: int, out_dir: Any = None) -> None:
        super().__init__(params, seed, out_dir)
        cfg = ItsG5Params.model_validate(dict(params))
        self.cfg = cfg
        self.dcc = Dcc(cfg.dcc)
        self.projection = LocalProjection(cfg.origin_lat_deg, cfg.origin_lon_deg)
        self.log = ChannelLog()
        self.wire = CamWire(cfg, purpose_key(seed, "v2x", "codec"), out_dir, purpose_key(seed, "v2x", "pm_codec"))
        self.medium = Medium(cfg, seed, self.wire, self.log)
        self.ca = CaService(cfg, seed, self.wire, self.log, self.dcc, self.projection)
        # the platooning message (None: CAMs only)
        self.pm = PmService(cfg, seed, self.wire, self.log, self.dcc, self.projection) \
            if cfg.platooning_message is not None else None
        self.carries_platooning_message = self.pm is not None
        rx_keys = (self.ca.rx_latency_key, self.pm.rx_latency_key if self.pm is not None else None)
        self.receptions = Receptions(cfg, self.log, rx_keys, self.carries_platooning_message)

    @property
    def cam_bytes(self) -> dict[bool, int]:
        """CAM size in bytes, without (False) and with (True) the low-frequency container."""
        return self.ca.cam_bytes

    @property
    def frame_bytes(self) -> dict[bool, int]:
        """The CAM's 802.11p frame size in bytes, without and with the low-frequency container."""
        return self.ca.frame_bytes

    @property
    def airtime_ns(self) -> dict[bool, int]:
        """The CAM frame's airtime in ns, without and with the low-frequency container."""
        return self.ca.airtime_ns

    # -- stations ------------------------------------------------------------------------------------------------
    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        """Append a station per robot; each starts its CA service U[0, start_jitter_s) after its spawn time."""
        if not robots:
            return
        jitter_s = self.cfg.generation.start_jitter_s
        spawn_ns = np.asarray([spec.spawn_ns for spec in robots], np.int64)
        offsets = np.asarray(
            [round(stream(self.seed, "v2x", spec.id).uniform(0.0, jitter_s) * 1e9) if jitter_s > 0 else 0
             for spec in robots], np.int64)
        self.medium.spawn(np.asarray([spec.id for spec in robots], np.int64), spawn_ns)
        self.ca.spawn(spawn_ns + offsets)
        if self.pm is not None:
            self.pm.spawn(spawn_ns + offsets)  # the PM service starts with the CA service
        self.dcc.spawn(len(robots))

    def despawn(self, robot_ids: Sequence[int]) -> None:
        """Remove stations; their frames on air finish, their queued frames and pending receptions vanish."""
        gone = np.isin(self.medium.ids, np.asarray(list(robot_ids), np.int64))
        if not gone.any():
            return
        keep = ~gone
        removed_ids = self.medium.ids[gone]
        self.medium.despawn(gone)
        if self.pm is not None:
            self.pm.despawn(keep, removed_ids)
        self.ca.despawn(keep)
        self.dcc.despawn(keep)
        self.receptions.forget(removed_ids)

    # -- the step ---------------------------------------------------------------------------------------------------
    def step(self, t_ns: int, estimate: Mapping[str, np.ndarray], interest: Interest) -> Deliveries:
        """Advance the channel to ``t_ns``; return the receptions completed in (previous step, t_ns]."""
        medium = self.medium
        ids = np.asarray(estimate["id"], np.int64)
        if len(ids) != len(medium.ids) or not np.array_equal(ids, medium.ids):
            raise ValueError(
                f"itsg5: estimate rows (ids {ids[:8].tolist()}...) do not match the spawned stations "
                f"({medium.ids[:8].tolist()}...); spawn/despawn every robot before stepping"
            )
        t_ns = int(t_ns)
        x = np.ascontiguousarray(estimate["x"], np.float64)
        y = np.ascontiguousarray(estimate["y"], np.float64)
        pairs = medium.set_interest(interest)
        if pairs is not None and self.pm is not None:
            self.pm.listen(medium.ids, *pairs)
        if medium.advance(t_ns, x, y, self._window):
            self.receptions.collect(medium)
        if len(medium.ids):
            yaw = np.asarray(estimate["yaw"], np.float64)
            v = np.asarray(estimate["v"], np.float64)
            self.ca.generate(t_ns, medium, estimate, x, y, yaw, v)
            if self.pm is not None:
                self.pm.generate(t_ns, medium, estimate, x, y, yaw, v)
        return self.receptions.release(t_ns, self.pm)

    def _window(self, t_end_ns: int, cbr: np.ndarray) -> None:
        """A closed CBR window: DCC reacts, the log keeps it with the gap DCC now leaves between CAMs."""
        self.dcc.update(cbr)
        self.log.window(t_end_ns, self.medium.ids, cbr, self.dcc.t_off_ns(self.ca.airtime_ns[False]))

    # -- attacks ---------------------------------------------------------------------------------------------------
    @property
    def min_message_interval_s(self) -> float:
        """The shortest gap an honest station leaves between two CAMs: T_GenCamMin, or the fixed rate's period."""
        g = self.cfg.generation
        return 1.0 / g.fixed_rate_hz if g.mode == "fixed_rate" else g.t_gen_cam_min_s

    def attach_attacks(self, plan: AttackPlan) -> None:
        """Apply ``plan`` to what the stations send (after the facilities, before the encoder: the capture holds the
        forged frames) and carry its ground truth: an ``attack`` column in the log and in the deliveries (with the
        message ``kind``), the id a frame claims as its sender. Its jammers go on the medium."""
        self.ca.forger = plan
        if self.pm is not None:
            self.pm.forger = plan
        if plan.jammers:  # jammers act on the air: the medium adds their power (comms_models.itsg5.jamming)
            self.medium.attach_jammers([a.jammer() for a in plan.jammers])
            labels = np.array([0, *(a.ctx.label for a in plan.jammers)], np.int64)
            self.log.jammed_by = lambda ids: labels[self.medium.jammer_holding(ids)]
        self.log.attacks = plan
        self.receptions.attach(plan)
        self.log_port = with_attack_column(V2X_LOG, jammers=bool(plan.jammers))

    # -- outputs ------------------------------------------------------------------------------------------------------
    @property
    def keep_log(self) -> bool:  # type: ignore[override]
        """Whether the log keeps rows (``CommsModel.keep_log``); its counts are kept either way."""
        return self.log.keep

    @keep_log.setter
    def keep_log(self, value: bool) -> None:
        self.log.keep = value

    def drain_records(self) -> dict[str, np.ndarray]:
        """Every transmission ("sent" at its start on air, "dcc_dropped" when discarded) and the receptions of the
        interest pairs (all links with ``trace: all``) since the last call; see ``CommsModel.drain_records``."""
        return self.log.drain_records()

    def drain_load(self) -> dict[str, np.ndarray]:
        """Each station's CBR per DCC window since the last call, with the DCC gap it leaves (see
        ``CommsModel.drain_load``)."""
        return self.log.drain_load()

    def drain_triggers(self) -> dict[str, np.ndarray]:
        """Each CAM generated since the last call and the rule that triggered it (see
        ``CommsModel.drain_triggers``)."""
        return self.log.drain_triggers()

    def metrics(self) -> dict[str, Any]:
        """The log's counts (``ChannelLog.summary``), the frame sizes and how many CAMs the codec check decoded
        (with the platooning message: the same for PMs, under ``pm*`` keys)."""
        out = {**self.log.summary(), "codec_checked": self.wire.checked,
               "frame_bytes": {"hf": self.frame_bytes[False], "lf": self.frame_bytes[True]}}
        if self.pm is not None:
            out["pm_codec_checked"] = self.wire.pm_checked
            out["pm_frame_bytes"] = {"no_peer": self.pm.frame_bytes[False], "peer": self.pm.frame_bytes[True]}
        return out

    def finalize(self) -> None:
        """Close the capture."""
        self.wire.close()

