"""Parameters of the C-V2X (LTE-V2X PC5, sidelink transmission mode 4) channel: the scenario's ``channel:`` block
when ``type: cv2x``.

Defaults are the configuration of the analytical model the channel is validated against (Gonzalez-Martin,
Sepulcre, Molina-Masegosa, Gozalvez, IEEE TVT 68(2), 2019): 10 MHz at 5.9 GHz, four subchannels of 12 resource
blocks, a 190-byte message in one subchannel at MCS 9 (QPSK, code rate about 0.7), 23 dBm, sensing threshold
-90.5 dBm, noise -95 dBm over the channel, WINNER+ B1 LOS path loss with 3 dB shadowing; and the 3GPP values of the
scheduler (TS 36.213 14.1.1.6, TS 36.321 5.14.1.1). CAM generation and processing delays are the ITS-G5 model's
(``comms_models.itsg5.params``), so both technologies are driven by the same ETSI rules.
Everything is SI except the 3GPP quantities counted in subframes (milliseconds), whose unit is in the name.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..itsg5.params import GenerationParams, LatencyParams

SUBCHANNEL_SIZES_RB = (4, 5, 6, 8, 9, 10, 12, 15, 16, 18, 20, 25, 30, 48, 50, 75, 100)
"""Subchannel sizes [resource blocks] a sidelink pool may be configured with (TS 36.331 SL-CommResourcePoolV2X-r14
``sizeSubchannel-r14``, adjacent and non-adjacent PSCCH values together)."""
NR_SUBCHANNEL_SIZES_RB = (10, 12, 15, 20, 25, 50, 75, 100)
"""Subchannel sizes [PRB] of an NR sidelink pool (TS 38.331 sl-SubchannelSize-r16)."""
NR_CARRIER_RBS = {(10, 15): 52, (10, 30): 24, (10, 60): 11, (20, 15): 106, (20, 30): 51, (20, 60): 24}
"""Resource blocks of an NR carrier by (bandwidth [MHz], subcarrier spacing [kHz]) (TS 38.101-1 Table 5.3.2-1)."""
RRI_MS = (20, 50, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000)
"""Resource reservation intervals [ms] (TS 36.213 Table 14.2.1-2; 20 and 50 ms need
``restrictResourceReservationPeriod``)."""


class _Strict(BaseModel):
    """Unknown keys are errors, numbers are finite; a parameter set is immutable once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class PhyParams(_Strict):
    """Carrier, resource grid, modulation and coding, and the receiver."""

    bandwidth_mhz: Literal[10, 20] = Field(10, description="[MHz] channel: 50 (10 MHz) or 100 (20 MHz) resource "
                                           "blocks of 180 kHz")
    subchannel_rbs: int = Field(12, description="[RB] resource blocks per subchannel (TS 36.331 sizeSubchannel); "
                                "the carrier holds floor(RBs / size) subchannels")
    mcs: int = Field(9, ge=0, le=20, description="PSSCH MCS index (TS 36.213 Table 8.6.1-1; Rel-14: QPSK 0..10, "
                     "16QAM 11..20). 9: a 190-byte message fits one 12-RB subchannel")
    carrier_ghz: float = Field(5.9, ge=0.4, le=100.0, description="[GHz] carrier frequency (path loss)")
    tx_power_dbm: float = Field(23.0, ge=-30.0, le=33.0, description="[dBm] transmit power (3GPP UE maximum 23 "
                                "dBm; ETSI EN 302 571 allows 33 dBm EIRP)")
    noise_floor_dbm: float = Field(-95.0, ge=-150.0, le=-30.0, description="[dBm] noise over the whole carrier, "
                                   "noise figure included (-95 dBm: 9 dB over 10 MHz, as the validated model); a "
                                   "transmission sees its share per resource block")
    sensitivity_dbm: float = Field(-90.5, ge=-150.0, le=0.0, description="[dBm] sensing threshold: a transmission "
                                   "received below it is neither decoded nor its SCI read (TS 36.101 reference "
                                   "sensitivity for 10 MHz V2X: about -90.4 dBm)")
    bler_curve: Literal["r1_160284"] = Field("r1_160284", description="link-level SINR -> BLER curve (see bler.py)")

    @field_validator("subchannel_rbs")
    @classmethod
    def _size(cls, value: int) -> int:
        if value not in SUBCHANNEL_SIZES_RB:
            raise ValueError(f"subchannel_rbs must be one of {SUBCHANNEL_SIZES_RB} (TS 36.331), not {value}")
        return value

    @property
    def carrier_rbs(self) -> int:
        """Resource blocks of the carrier."""
        return 5 * self.bandwidth_mhz

    @property
    def n_subchannels(self) -> int:
        """Subchannels the carrier holds."""
        return self.carrier_rbs // self.subchannel_rbs


class PropagationParams(_Strict):
    """Path loss, shadowing and fading (per transmission and link)."""

    path_loss: Literal["winner_b1", "tr37885_highway", "dual_slope", "free_space"] = Field(
        "winner_b1", description="'winner_b1': WINNER+ B1 LOS of TR 36.885 (breakpoint 4 h h' f / c, 3 dB "
        "shadowing); 'tr37885_highway': TR 37.885 highway LOS 32.4 + 20 log10 d3D + 20 log10 fc, 3 dB shadowing; "
        "'dual_slope' / 'free_space': the ITS-G5 model's (comms_models.itsg5.radio)")
    antenna_height_m: float = Field(1.5, ge=0.1, le=50.0, description="[m] antenna height of every station")
    shadowing_db: float = Field(3.0, ge=0.0, le=30.0, description="[dB] log-normal shadowing std dev of "
                                "winner_b1 and tr37885_highway (TR 36.885 / TR 37.885: 3 dB); the ITS-G5 models "
                                "use their own (itsg5 radio defaults)")
    fading: Literal["none", "nakagami"] = Field("none", description="fast fading per transmission and link: "
                                                "'nakagami' uses the ITS-G5 model's distance-dependent m")
    cutoff_power_dbm: float = Field(-110.0, ge=-150.0, le=0.0, description="[dBm] a link whose mean received power "
                                    "is below this is ignored (neither decoded, nor interference, nor sensed)")


class SpsParams(_Strict):
    """Sensing-based semi-persistent scheduling (TS 36.213 14.1.1.6; TS 36.321 5.14.1.1)."""

    rri_ms: int = Field(100, description="[ms] resource reservation interval (20, 50, 100, 200 ... 1000)")
    t1_ms: int = Field(1, ge=1, le=4, description="[ms] start of the selection window after the packet arrives "
                       "(T1 <= 4)")
    t2_ms: int = Field(100, ge=1, le=100, description="[ms] end of the selection window (LTE: 20 <= T2 <= 100; NR: "
                       "T2min, 1..20 ms, <= T2; and within the packet delay budget)")
    delay_budget_ms: int = Field(100, ge=1, le=1000, description="[ms] packet delay budget: the window ends at "
                                 "min(T2, budget); a reservation that would send later triggers a reselection")
    sensing_window_ms: int = Field(1000, ge=100, le=1000, description="[ms] how far back the station senses")
    rsrp_threshold_dbm: float = Field(-90.5, ge=-150.0, le=0.0, description="[dBm] a candidate overlapping a "
                                      "reservation whose transmission was received above this is excluded; "
                                      "compared with the whole transmission's received power (the per-resource-"
                                      "element PSSCH-RSRP is lower by 10 log10(12 N_PRB) dB: -90.5 dBm over 10 RBs "
                                      "is about -111 dBm per element)")
    rsrp_step_db: float = Field(3.0, gt=0.0, le=20.0, description="[dB] threshold raise while too few candidates "
                                "remain")
    min_candidates: float = Field(0.2, gt=0.0, le=1.0, description="share of all candidates that must remain "
                                  "after the exclusions, and the size of the best list the station picks from")
    p_keep: float = Field(0.0, ge=0.0, le=0.8, description="probability of keeping the reservation when the "
                          "reselection counter expires (TS 36.321: probResourceKeep 0..0.8)")
    unused_reselect_ms: int = Field(1000, ge=100, le=10_000, description="[ms] a reservation not used for this long "
                                    "is given up (TS 36.321: no transmission during the last second)")

    @field_validator("rri_ms")
    @classmethod
    def _rri(cls, value: int) -> int:
        if value not in RRI_MS:
            raise ValueError(f"rri_ms must be one of {RRI_MS}, not {value}")
        return value

    @model_validator(mode="after")
    def _window(self) -> SpsParams:
        if self.t2_ms <= self.t1_ms:
            raise ValueError("t2_ms must exceed t1_ms")
        return self

    @property
    def counter_range(self) -> tuple[int, int]:
        """Inclusive range of the reselection counter (TS 36.321 5.14.1.1): [5, 15] for RRI >= 100 ms, [10, 30]
        for 50 ms, [25, 75] for 20 ms."""
        return {20: (25, 75), 50: (10, 30)}.get(self.rri_ms, (5, 15))


class Cv2xParams(_Strict):
    """The ``channel:`` block of a scenario with ``type: cv2x``."""

    generation: GenerationParams = Field(default_factory=GenerationParams, description="CAM generation (the ITS-G5 "
                                         "model's ETSI rules)")
    rat: Literal["lte", "nr"] = Field("lte", description="'lte': LTE-V2X mode 4 (Rel-14, 1 ms subframes); 'nr': "
                                      "NR-V2X mode 2 (Rel-16, slots of the numerology scs_khz)")
    scs_khz: Literal[15, 30, 60] = Field(15, description="[kHz] subcarrier spacing (NR only): a slot lasts 15 / "
                                         "scs_khz ms and a resource block is 12 x scs_khz wide")
    scheduling: Literal["sps", "dynamic"] = Field("sps", description="'sps': semi-persistent reservations; "
                                                  "'dynamic' (NR only): a new selection for every packet, nothing "
                                                  "reserved for the next")
    blind_retransmissions: int = Field(0, ge=0, le=2, description="copies sent after the first, in other slots of "
                                       "the selection window chosen with it (NR dynamic scheduling only; a "
                                       "receiver decodes the packet if it decodes any copy)")
    latency: LatencyParams = Field(default_factory=LatencyParams, description="processing delays")
    phy: PhyParams = Field(default_factory=PhyParams, description="carrier, resources, MCS, receiver")
    propagation: PropagationParams = Field(default_factory=PropagationParams, description="path loss and fading")
    sps: SpsParams = Field(default_factory=SpsParams, description="semi-persistent scheduling")
    packet_bytes: int | None = Field(
        None, ge=1, le=10_000, description="[byte] every message's size at the MAC; null: the CAM's UPER size (with "
        "or without its low-frequency container) plus headers_bytes and security_bytes")
    headers_bytes: int = Field(44, ge=0, le=1000, description="[byte] GeoNetworking SHB and BTP-B headers (4 + 8 + "
                               "28 + 4) added to the CAM")
    security_bytes: int = Field(0, ge=0, le=2000, description="[byte] security envelope per message (signed "
                                "with a digest of the signer's certificate)")
    path_history_points: int = Field(0, ge=0, le=40, description="points (with their delta time) in the path "
                                     "history of a CAM's low-frequency container (CDD PathHistory: 0..40; 23 "
                                     "points: a 241-byte CAM)")
    certificate_bytes: int = Field(0, ge=0, le=2000, description="[byte] added when the message carries the "
                                   "signer's full certificate instead of its digest (ETSI TS 103 097: once per "
                                   "certificate_interval_s); 0: never")
    certificate_interval_s: float = Field(1.0, gt=0.0, le=60.0, description="[s] a CAM carries the certificate when "
                                          "at least this long passed since the last one that did (and the first)")
    station_type: int = Field(5, ge=0, le=255, description="CDD StationType of the encoded CAMs (5 passenger car)")
    platooning_message: bool = Field(False, description="every CAM's transport block also carries a platooning "
                                     "message (the sender's desired acceleration; comms_models/itsg5/platooning.asn, "
                                     "with its own headers_bytes and security_bytes): one MAC PDU with both, sent "
                                     "at the CAM's instants (generation fixed_rate gives the PM a fixed rate)")
    cbr_threshold_dbm: float = Field(-94.0, ge=-150.0, le=0.0, description="[dBm] a subchannel counts busy in a "
                                     "subframe when its S-RSSI exceeds this (TS 36.214 5.1.30)")
    cbr_window_ms: int = Field(100, ge=10, le=10_000, description="[ms] CBR measurement window")
    congestion_control: bool = Field(False, description="limit each station's channel occupancy ratio (CR, over "
                                     "the last 1,000 subframes) to cr_limits for the CBR of its last window, by "
                                     "dropping the transmissions that would exceed it (TS 36.213 14.1.1.4C, ETSI "
                                     "TS 103 574)")
    cr_limits: tuple[tuple[float, float], ...] = Field(
        ((0.3, 1.0), (0.65, 0.03), (0.8, 0.006), (1.0, 0.003)),
        description="(CBR upper bound, CR limit) per CBR range, ascending, the last bound 1: ETSI TS 103 574 "
        "V1.1.1 Table 1 for the CAM's priority (PPPP 5): no limit up to 0.3, 0.03 to 0.65, 0.006 to 0.8, 0.003 "
        "above")

    @field_validator("cr_limits")
    @classmethod
    def _cr_limits(cls, value: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
        bounds = [b for b, _ in value]
        if not value or bounds != sorted(set(bounds)) or bounds[-1] != 1.0 or bounds[0] <= 0.0:
            raise ValueError(f"cr_limits must be (CBR bound, CR limit) pairs with strictly ascending bounds in (0, 1], "
                             f"the last 1.0; got bounds {bounds}")
        if not all(0.0 < limit <= 1.0 for _, limit in value):
            raise ValueError("every CR limit of cr_limits must be in (0, 1]")
        return value
    trace: Literal["interest", "all"] = Field(
        "interest", description="rx rows of trace/v2x.parquet: only the pairs the applications read, or all links"
    )
    deliver: Literal["interest", "all"] = Field(
        "interest", description="receptions returned to the applications: their pairs only, or every reception"
    )
    origin_lat_deg: float = Field(51.4934, ge=-90.0, le=90.0, description="[deg] WGS84 latitude of local (0, 0)")
    origin_lon_deg: float = Field(7.4136, ge=-180.0, le=180.0, description="[deg] WGS84 longitude of local (0, 0)")

    @model_validator(mode="after")
    def _rat(self) -> Cv2xParams:
        if self.rat == "lte":
            if self.scs_khz != 15 or self.scheduling != "sps" or self.blind_retransmissions:
                raise ValueError("scs_khz other than 15, scheduling 'dynamic' and blind_retransmissions are NR-V2X "
                                 "options: set rat: nr (LTE-V2X mode 4 here is 15 kHz, semi-persistent, without "
                                 "retransmissions)")
            if self.sps.t2_ms < 20 or self.sps.delay_budget_ms < 20:
                raise ValueError("LTE-V2X: sps.t2_ms and sps.delay_budget_ms must be at least 20 (TS 36.213)")
            return self
        if self.phy.subchannel_rbs not in NR_SUBCHANNEL_SIZES_RB:
            raise ValueError(f"rat nr: phy.subchannel_rbs must be one of {NR_SUBCHANNEL_SIZES_RB}, not "
                             f"{self.phy.subchannel_rbs}")
        if self.n_subchannels < 1:
            raise ValueError(f"rat nr: a {self.phy.bandwidth_mhz} MHz carrier at {self.scs_khz} kHz has "
                             f"{self.carrier_rbs} resource blocks, fewer than one subchannel of "
                             f"{self.phy.subchannel_rbs}")
        if self.blind_retransmissions and self.scheduling != "dynamic":
            raise ValueError("blind_retransmissions need scheduling: dynamic")
        window = min(self.sps.t2_ms, self.sps.delay_budget_ms) - self.sps.t1_ms + 1
        if window * self.slots_per_ms < self.blind_retransmissions + 1:
            raise ValueError("the selection window holds fewer slots than copies of a packet")
        return self

    @property
    def slots_per_ms(self) -> int:
        """Slots (LTE: subframes) per millisecond: 2^mu."""
        return self.scs_khz // 15 if self.rat == "nr" else 1

    @property
    def carrier_rbs(self) -> int:
        """Resource blocks of the carrier (LTE: 5 per MHz; NR: TS 38.101-1 by bandwidth and spacing)."""
        return self.phy.carrier_rbs if self.rat == "lte" else NR_CARRIER_RBS[self.phy.bandwidth_mhz, self.scs_khz]

    @property
    def n_subchannels(self) -> int:
        """Subchannels the carrier holds."""
        return self.carrier_rbs // self.phy.subchannel_rbs
