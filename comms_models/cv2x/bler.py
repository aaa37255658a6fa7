"""Link-level abstraction: SINR -> block error rate of a PSSCH transport block.

The curve is the one the validated analytical model uses (Gonzalez-Martin et al., IEEE TVT 68(2), 2019, Sec. V):
a 190-byte transport block, QPSK at code rate about 0.7 (MCS 9 on 10 PSSCH resource blocks), relative speed
280 km/h, from the 3GPP RAN1 link-level results of R1-160284 ("DMRS enhancement of V2V"). BLER is interpolated
linearly between the points below (SINR in dB); it is 1 below 0 dB and 1e-4 above 20 dB (the published points
flatten at 1e-3 from 16 to 20 dB).

Other MCS and sizes shift the curve along the SINR axis by the difference of their Shannon-bound SINRs at equal gap,
``10 log10((2^e - 1) / (2^e_ref - 1))`` with ``e`` the information bits per resource element (``tbs``): exact for
the validated configuration, an approximation elsewhere (no per-MCS link-level curves are published with the same
channel model).
"""

from __future__ import annotations

import numpy as np

from .tbs import efficiency_bits_per_re, shannon_shift_db

R1_160284_SINR_DB = np.array([0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 20.0 + 1e-6])
R1_160284_BLER = np.array([1.0, 0.9, 0.7, 0.4, 0.13, 0.045, 0.017, 0.007, 1e-3, 1e-3, 1e-3, 1e-4])
REFERENCE_EFFICIENCY = efficiency_bits_per_re(9, 10)
"""Bits per resource element of the reference curve: a 1544-bit transport block (+ CRC) on 10 resource blocks."""


def bler_reference(sinr_db: np.ndarray) -> np.ndarray:
    """BLER of the reference curve at ``sinr_db`` (1 below the first point, 1e-4 above the last)."""
    return np.interp(sinr_db, R1_160284_SINR_DB, R1_160284_BLER, left=1.0, right=1e-4)


def sinr_shift_db(mcs: int, n_prb: np.ndarray) -> np.ndarray:
    """SINR shift [dB] of the curve for a transport block of ``n_prb`` PSSCH resource blocks at ``mcs``."""
    return np.array([shannon_shift_db(efficiency_bits_per_re(mcs, int(n)), REFERENCE_EFFICIENCY)
                     for n in np.atleast_1d(n_prb)])


def bler(sinr_db: np.ndarray, shift_db: np.ndarray | float = 0.0) -> np.ndarray:
    """BLER at ``sinr_db`` of a transport block whose curve is shifted by ``shift_db``."""
    return bler_reference(np.asarray(sinr_db, np.float64) - shift_db)
