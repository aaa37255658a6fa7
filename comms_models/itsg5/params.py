"""Parameters of the ITS-G5 channel: the scenario's ``channel:`` block when ``type: itsg5``.

Defaults follow the standards the model implements: CA basic service (ETSI EN 302 637-2, 6.1.3), reactive DCC
(ETSI TS 102 687, tables A.1/A.2), IEEE 802.11p / ETSI EN 302 663 at 6 Mbit/s on a 10 MHz channel, and the
measured highway propagation model (dual slope with log-normal shadowing, Nakagami-m fading).
Everything is SI; the unit is part of every field name. Every number is finite and within a physically meaningful
range (given in its description), so that no value that validates makes the radio or the scheduler diverge.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    """Unknown keys are errors, numbers are finite; a parameter set is immutable once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# -- delay distributions ---------------------------------------------------------------------------------------
class ConstantDelay(_Strict):
    """A fixed delay."""

    dist: Literal["constant"] = Field("constant", description="distribution name")
    value_s: float = Field(0.0, ge=0.0, le=10.0, description="[s] the delay")

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` delays in seconds."""
        return np.full(n, self.value_s)


class UniformDelay(_Strict):
    """A delay uniform in [low_s, high_s]."""

    dist: Literal["uniform"] = Field("uniform", description="distribution name")
    low_s: float = Field(ge=0.0, le=10.0, description="[s] smallest delay")
    high_s: float = Field(ge=0.0, le=10.0, description="[s] largest delay")

    @model_validator(mode="after")
    def _ordered(self) -> UniformDelay:
        if self.high_s < self.low_s:
            raise ValueError(f"high_s ({self.high_s}) must not be below low_s ({self.low_s})")
        return self

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` delays in seconds."""
        return rng.uniform(self.low_s, self.high_s, n)


class NormalDelay(_Strict):
    """A normally distributed delay, clipped below at ``min_s`` (a processing time is never negative)."""

    dist: Literal["normal"] = Field("normal", description="distribution name")
    mean_s: float = Field(ge=0.0, le=10.0, description="[s] mean delay")
    std_s: float = Field(ge=0.0, le=10.0, description="[s] standard deviation")
    min_s: float = Field(0.0, ge=0.0, le=10.0, description="[s] lower clip")

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` delays in seconds."""
        return np.maximum(rng.normal(self.mean_s, self.std_s, n), self.min_s)


Delay = Annotated[ConstantDelay | UniformDelay | NormalDelay, Field(discriminator="dist")]


# -- blocks ------------------------------------------------------------------------------------------------------
class GenerationParams(_Strict):
    """When a station generates a CAM (EN 302 637-2, 6.1.3) or, in ``fixed_rate`` mode, at a constant rate."""

    mode: Literal["etsi", "fixed_rate"] = Field(
        "etsi", description="'etsi': the CA basic service's generation rules; 'fixed_rate': every 1/fixed_rate_hz"
    )
    fixed_rate_hz: float = Field(10.0, ge=0.01, le=1000.0, description="[Hz] CAM rate in fixed_rate mode "
                                 "(0.01 to 1000)")
    t_gen_cam_min_s: float = Field(0.1, ge=1e-3, le=10.0, description="[s] T_GenCamMin, shortest CAM interval "
                                   "(1 ms to 10 s; ETSI: 0.1)")
    t_gen_cam_max_s: float = Field(1.0, ge=1e-3, le=60.0, description="[s] T_GenCamMax, longest CAM interval "
                                   "(1 ms to 60 s; ETSI: 1)")
    t_check_s: float | None = Field(
        None, ge=1e-3, le=10.0,
        description="[s] T_CheckCamGen; None: at every channel step (1 ms to 10 s, must not exceed T_GenCamMin)",
    )
    n_gen_cam: int = Field(3, ge=1, le=100, description="N_GenCam: consecutive time-triggered CAMs before "
                           "T_GenCamMax (1 to 100)")
    heading_threshold_deg: float = Field(4.0, ge=0.0, le=360.0, description="[deg] heading change trigger")
    position_threshold_m: float = Field(4.0, ge=0.0, le=1000.0, description="[m] position change trigger")
    speed_threshold_mps: float = Field(0.5, ge=0.0, le=100.0, description="[m/s] speed change trigger")
    lf_interval_s: float = Field(0.5, ge=1e-3, le=60.0, description="[s] minimum interval of the low-frequency "
                                 "container (1 ms to 60 s)")
    start_jitter_s: float = Field(
        0.1, ge=0.0, le=60.0, description="[s] a station's first check is delayed by U[0, start_jitter_s) after "
        "its spawn (unsynchronised clocks); drawn from the station's own stream"
    )

    @model_validator(mode="after")
    def _consistent(self) -> GenerationParams:
        if self.t_gen_cam_max_s < self.t_gen_cam_min_s:
            raise ValueError("t_gen_cam_max_s must not be below t_gen_cam_min_s")
        if self.t_check_s is not None and self.t_check_s > self.t_gen_cam_min_s:
            raise ValueError("t_check_s must not exceed t_gen_cam_min_s (EN 302 637-2, 6.1.3)")
        return self


class LatencyParams(_Strict):
    """Processing delays outside the radio: sampling to MAC queue (tx), end of frame to application (rx)."""

    tx_processing: Delay = Field(
        default_factory=lambda: UniformDelay(low_s=0.001, high_s=0.003),
        description="[s] from the vehicle-data sample (generation time) to the frame entering the MAC queue",
    )
    rx_processing: Delay = Field(
        default_factory=lambda: UniformDelay(low_s=0.001, high_s=0.003),
        description="[s] from the end of a frame on air to the application receiving the decoded CAM",
    )


class RadioParams(_Strict):
    """Physical layer and propagation at 5.9 GHz, 10 MHz channel, 6 Mbit/s (EN 302 663)."""

    # Power bounds: ETSI EN 302 571 allows at most 33 dBm EIRP; -150 dBm is far below any receiver's noise.
    tx_power_dbm: float = Field(23.0, ge=-30.0, le=40.0, description="[dBm] transmit power (EIRP), -30 to 40")
    sensitivity_dbm: float = Field(
        -85.0, ge=-150.0, le=0.0,
        description="[dBm] weakest frame decoded (-85 dBm reproduces the measured dual-slope PDR: "
        "0.9/0.6/0.3 at 100/200/300 m), -150 to 0",
    )
    cs_threshold_dbm: float = Field(
        -85.0, ge=-150.0, le=0.0,
        description="[dBm] energy-detection level: channel sensed busy (backoff freezes, CBR counts), -150 to 0",
    )
    noise_floor_dbm: float = Field(-98.0, ge=-150.0, le=-30.0, description="[dBm] thermal noise plus noise figure "
                                   "over 10 MHz, -150 to -30")
    capture_threshold_db: float = Field(
        6.0, ge=-10.0, le=50.0,
        description="[dB] SINR needed to decode a frame against the sum of overlapping interferers, -10 to 50",
    )
    path_loss: Literal["dual_slope", "free_space"] = Field(
        "dual_slope", description="'free_space': 47.86 + 20 log10 d; 'dual_slope': exponent 2 below "
        "breakpoint_m, 4 beyond, with log-normal shadowing"
    )
    breakpoint_m: float = Field(100.0, ge=1.0, le=10_000.0, description="[m] dual-slope breakpoint (1 m to 10 km)")
    shadowing_near_db: float = Field(5.6, ge=0.0, le=30.0, description="[dB] shadowing std dev below the "
                                     "breakpoint (0 to 30)")
    shadowing_far_db: float = Field(8.1, ge=0.0, le=30.0, description="[dB] shadowing std dev beyond the "
                                    "breakpoint (0 to 30)")
    fading: Literal["nakagami", "none"] = Field("nakagami", description="fast fading of each frame on each link")
    nakagami_m: Literal["distance_table", "simple"] = Field(
        "distance_table", description="'distance_table': m = 3.01/1.18/1.94/1.86/0.45/0.32 with limits "
        "4.7/11.7/28.9/71.6/177.3 m; 'simple': 1.5 below 80 m, 0.75 beyond"
    )
    min_distance_m: float = Field(1.0, ge=0.01, le=100.0, description="[m] distances below this count as this "
                                  "(near field), 0.01 to 100")
    cutoff_power_dbm: float = Field(
        -110.0, ge=-150.0, le=0.0,
        description="[dBm] links whose mean received power is below this are ignored entirely (not even as "
        "interference); sets the radius of the spatial index, -150 to 0. At -110 a frame from the radius would "
        "reach the sensitivity with probability 2.0e-3 (radio.cutoff_bound; radio.cutoff_power_for gives the "
        "cut-off for another bound, e.g. -118 dBm for 1e-4)",
    )


class MacParams(_Strict):
    """EDCA access category best effort, broadcast (IEEE 802.11p; EN 302 663)."""

    aifs_s: float = Field(110e-6, ge=0.0, le=0.01, description="[s] AIFS = SIFS 32 us + AIFSN 6 * slot 13 us "
                          "(0 to 10 ms)")
    slot_s: float = Field(13e-6, ge=1e-6, le=1e-3, description="[s] slot time (1 us to 1 ms)")
    cw: int = Field(15, ge=0, le=1023, description="contention window (backoff uniform in 0..cw slots; never "
                    "doubles), 0 to 1023 as in 802.11")
    cca_time_s: float = Field(
        8e-6, ge=0.0, le=1e-3, description="[s] time to detect another frame's preamble: stations whose backoff "
        "ends within it transmit as well (0 to 1 ms)"
    )


class LimericParams(_Strict):
    """Adaptive DCC (LIMERIC, TS 102 687 v1.2.1, 5.4)."""

    alpha: float = Field(0.016, gt=0.0, lt=1.0, description="memory factor a")
    beta: float = Field(0.0012, gt=0.0, le=1.0, description="gain b")
    cbr_target: float = Field(0.68, gt=0.0, lt=1.0, description="target channel busy ratio")
    delta_min: float = Field(0.0006, gt=0.0, le=1.0, description="smallest duty cycle")
    delta_max: float = Field(0.03, gt=0.0, le=1.0, description="largest duty cycle (also the initial value)")
    g_plus: float = Field(0.0005, ge=-1.0, le=1.0, description="largest increase per update")
    g_minus: float = Field(-0.00025, ge=-1.0, le=1.0, description="largest decrease per update (negative)")
    period_s: float = Field(0.2, ge=1e-3, le=10.0, description="[s] update period (a multiple of the CBR window; "
                            "1 ms to 10 s)")


class DccParams(_Strict):
    """Decentralised congestion control (TS 102 687)."""

    mode: Literal["reactive", "adaptive", "off"] = Field(
        "reactive", description="'reactive': state machine over CBR (table); 'adaptive': LIMERIC; 'off'"
    )
    table: Literal["A.1", "A.2"] = Field(
        "A.1", description="reactive table: A.1 for frames up to 1 ms on air, A.2 for frames up to 500 us"
    )
    cbr_window_s: float = Field(0.1, ge=1e-3, le=10.0, description="[s] CBR measurement window (also the DCC "
                                "evaluation), 1 ms to 10 s")
    limeric: LimericParams = Field(default_factory=LimericParams, description="adaptive DCC parameters")


class PlatooningMessageParams(_Strict):
    """The platooning message (``comms_models.itsg5.pm``): our own message type beside the CAM, through the same
    radio. Absent (the default): no PM is sent."""

    rate_hz: float = Field(10.0, ge=0.1, le=100.0, description="[Hz] PMs per second per station (0.1 to 100; "
                           "Plexe beacons and most CACC studies: 10)")
    max_age_s: float = Field(
        0.5, gt=0.0, le=60.0,
        description="[s] PM fields older than this (generation to delivery) are not attached to a CAM delivery, "
        "and a relayed leader acceleration older than this is sent as unavailable (0 to 60)",
    )


class ItsG5Params(_Strict):
    """The ``channel:`` block of a scenario with ``type: itsg5``."""

    generation: GenerationParams = Field(default_factory=GenerationParams, description="CAM generation")
    latency: LatencyParams = Field(default_factory=LatencyParams, description="processing delays")
    radio: RadioParams = Field(default_factory=RadioParams, description="physical layer and propagation")
    mac: MacParams = Field(default_factory=MacParams, description="channel access (EDCA best effort)")
    dcc: DccParams = Field(default_factory=DccParams, description="congestion control")
    security_bytes: int = Field(
        0, ge=0, le=2000, description="[byte] security envelope per frame (signed with certificate: ~140)"
    )
    station_type: int = Field(5, ge=0, le=255, description="CDD StationType (5 passenger car)")
    pcap: bool = Field(True, description="write out_dir/v2x.pcap with the frames on air (needs out_dir)")
    pcap_max_frames: int = Field(10_000, ge=0, le=100_000_000, description="frames written to the capture at "
                                 "most (0 to 1e8)")
    codec_sample_rate: float = Field(
        0.01, ge=0.0, le=1.0, description="fraction of CAMs also run through the real encoder and decoder, "
        "checking that receivers see what the wire carries"
    )
    codec_sample_max_per_s: int = Field(
        10, ge=1, le=1_000_000, description="of that sample, messages checked per simulated second at most (CAMs "
        "and platooning messages together; a check costs about 0.3 ms)"
    )
    trace: Literal["interest", "all"] = Field(
        "interest", description="rx rows of trace/v2x.parquet: only the pairs the applications read, or all links"
    )
    deliver: Literal["interest", "all"] = Field(
        "interest", description="receptions returned to the applications: their pairs only, or every reception"
    )
    start_utc_s: float = Field(
        1_704_067_200.0, ge=0.0, le=4.0e9,
        description="[s] UTC (POSIX seconds, 1970 to 2096) at simulation time zero, for generationDeltaTime",
    )
    origin_lat_deg: float = Field(51.4934, ge=-90.0, le=90.0, description="[deg] WGS84 latitude of local (0, 0)")
    origin_lon_deg: float = Field(7.4136, ge=-180.0, le=180.0, description="[deg] WGS84 longitude of local (0, 0)")
    platooning_message: PlatooningMessageParams | None = Field(
        None, description="send the platooning message too (e.g. {rate_hz: 10}, or true for the defaults); null or "
        "false: CAMs only")

    @field_validator("platooning_message", mode="before")
    @classmethod
    def _switch(cls, value: object) -> object:
        # true / false as on the ideal channel: the defaults, or off
        if isinstance(value, bool):
            return {} if value else None
        return value
