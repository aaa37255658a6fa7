"""The layout of the ITS-G5 access kernel's arrays (``access``): the columns of the station, frame, link, output,
counter and jammer tables, the kernel's status and the outcome codes. The channel's Python side fills and reads the
same tables by these names; the kernels that read them name this module in ``core.kernel_cache.depends_on``."""

from __future__ import annotations

import numpy as np

INF_NS = np.iinfo(np.int64).max

# -- outcome codes: positions in comms_models.base.OUTCOMES --------------------------------------------------
SENT, RECEIVED, BELOW_SENSITIVITY, COLLISION, HALF_DUPLEX, DCC_DROPPED, JAMMED = 0, 1, 2, 3, 4, 5, 6

# -- kernel status -------------------------------------------------------------------------------------------
DONE, NEED_CHECK, NEED_LINKS, NEED_TX_OUT, NEED_RX_OUT, NEED_WIN_OUT, NEED_ACTIVE = 0, 1, 2, 3, 4, 5, 6

# -- per-station integer columns (SI64) ----------------------------------------------------------------------
# The kernel gets the station tables column by column: ``si[S_START, r]`` is station r's start (the channel keeps
# them as (stations, columns) views of the same memory). A frame's links visit their receivers in row order and read
# a few columns of each, so each column is a stream; and a table of any size, one station included, has the one
# memory layout numba compiles the kernel for.
S_PENDING = 0  # 1 when a frame waits in the queue
S_READY = 1  # [ns] when the waiting frame reached the MAC
S_ANCHOR = 2  # [ns] when the current backoff countdown started (ready/idle + AIFS)
S_START = 3  # [ns] when the countdown ends (INF_NS while frozen)
S_BO = 4  # backoff slots left
S_FRAME = 5  # serial number of the waiting frame
S_GEN = 6  # [ns] its generation time
S_AIR = 7  # [ns] its airtime
S_LF = 8  # 1 if it carries the low-frequency container
S_SENSE = 9  # number of frames on air sensed above the carrier-sense level (own included)
S_IDLE_SINCE = 10  # [ns] start of the current idle period
S_BUSY_SINCE = 11  # [ns] start of the busy period (clipped to the current window)
S_OWN_ACTIVE = 12  # 1 while transmitting
S_OWN_STARTED = 13  # number of transmissions started so far
S_NLINKS = 14  # links on air at this receiver (sensed or not)
S_MEAS_SINCE = 15  # [ns] when the station started measuring (spawn)
S_ID = 16  # robot id
S_KIND = 17  # message kind of the waiting frame (KIND_CAM, KIND_PM)
S_NEXT = 18  # 1 when a second frame (the other kind) waits behind it
S_N_READY = 19  # the second frame's S_READY, S_FRAME, S_GEN, S_AIR, S_LF, S_KIND and its drawn backoff
S_N_FRAME = 20
S_N_GEN = 21
S_N_AIR = 22
S_N_LF = 23
S_N_KIND = 24
S_N_BO = 25
N_SI64 = 26
# -- per-station float columns (SF64) ------------------------------------------------------------------------
F_CUR_POWER = 0  # [mW] total power of the frames (and jammers) on air at this receiver
F_CUM_POWER = 1  # [mW] sum of the powers of every frame that ever started at this receiver
F_BUSY_ACC = 2  # [ns] busy time in the current window
F_CONTENT = 3  # 6 columns: x, y, yaw, v, a, yaw_rate of the waiting frame (as the receivers decode them)
F_N_CONTENT = 9  # 6 columns: the content of the second frame
F_JAM_CUR = 15  # [mW] power of the jammers transmitting now at this receiver (part of F_CUR_POWER)
F_JAM_CUM = 16  # [mW] sum of every rise of that power (part of F_CUM_POWER)
N_SF64 = 17
N_CONTENT = 6
KIND_CAM, KIND_PM = 0, 1  # a PM's content columns: see comms_models.itsg5.pm.PM_CONTENT

# -- frames on air (TI64 / TF64) -----------------------------------------------------------------------------
T_ROW = 0  # sender's station row (-1 once despawned)
T_ID = 1  # sender's robot id
T_FRAME = 2
T_GEN = 3
T_START = 4
T_END = 5
T_LINK_LO = 6
T_LINK_HI = 7
T_LF = 8
T_KIND = 9
T_REACT = 10  # bit j: reactive jammer j transmits because of this frame
N_TI64 = 11
# -- links (LI64 / LF64) --------------------------------------------------------------------------------------
L_RX = 0  # receiver's station row (-1 once despawned)
L_HD0 = 1  # receiver was transmitting when the frame started
L_HD_COUNT = 2  # receiver's S_OWN_STARTED when the frame started
N_LI64 = 3
L_POWER = 0  # [mW] received power
L_ACTIVE = 1  # [mW] power of the other frames on air at the receiver when this one started
L_CUM0 = 2  # [mW] receiver's F_CUM_POWER when this frame started (before adding it)
L_JAM0 = 3  # [mW] receiver's F_JAM_CUR - F_JAM_CUM when this frame started: jammer power over the frame is
# L_JAM0 + F_JAM_CUM at its end
N_LF64 = 4

# -- outputs -----------------------------------------------------------------------------------------------------
TX_FRAME, TX_ID, TX_GEN, TX_START, TX_END, TX_LF, TX_ROW, TX_KIND = 0, 1, 2, 3, 4, 5, 6, 7
N_TXO = 8
RX_FRAME, RX_SENDER, RX_ROW, RX_GEN, RX_END, RX_OUTCOME, RX_INTEREST, RX_KIND = 0, 1, 2, 3, 4, 5, 6, 7
N_RXO_I = 8
RXF_POWER = 0  # then the 6 content columns
N_RXO_F = 7

# -- counters (C) --------------------------------------------------------------------------------------------------
C_ACTIVE = 0  # frames on air
C_LINKS = 1  # used rows of the link buffer
C_PAR_LEFT = 2  # frames the parallel loops may still open before the kernel returns NEED_CHECK
C_TX_OUT = 3
C_RX_OUT = 4
C_WIN_OUT = 5
C_WIN_END = 6  # [ns] end of the current CBR window
C_NPEND = 7  # stations in pend when the kernel handed back before DONE
C_RESUME = 8  # 1 after a status other than DONE: the next call resumes the loop as it was (same pend order)
C_NEXT = 9  # [ns] after DONE: the earliest event left (a frame's end or start, a window's end); the caller lowers it
# when it queues a frame, and need not call again before then
N_C = 10

# -- jammers (JI64: one row per jammer; their power at each station: jam_p[j, r] in mW) ---------------------------
J_MODE = 0  # JAM_CONSTANT, JAM_PERIODIC or JAM_REACTIVE
J_FROM = 1  # [ns] the attack's window [J_FROM, J_TO)
J_TO = 2
J_PERIOD = 3  # [ns] periodic: its period, on for J_ON_NS at the start of each
J_ON_NS = 4
J_TARGET = 5  # reactive: the robot id whose frames it jams
J_ON = 6  # 1 while transmitting
J_NEXT = 7  # [ns] when it next switches (INF_NS: never by itself; a reactive one follows its target's frames)
J_FRAMES = 8  # reactive: its target's frames on air that it jams
N_JI64 = 9
JAM_CONSTANT, JAM_PERIODIC, JAM_REACTIVE = 0, 1, 2
LINK_MASK = (1 << 32) - 1  # the link of a receiver's scratch_code (the frame's serial above it)
