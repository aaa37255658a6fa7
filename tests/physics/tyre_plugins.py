"""Tyre models as plug-ins (``vehicle.params.tyre_model: tests.physics.tyre_plugins:Name``)."""

from __future__ import annotations

import math

from numba import njit

from federates.physics.models.tyres import TyreModel


@njit
def _brush(alpha, fz, c_alpha, mu):  # pragma: no cover - compiled
    # Fiala brush model, saturating (Pacejka, Tire and Vehicle Dynamics, eq. 3.20), written out independently
    sgn = 1.0 if alpha >= 0.0 else -1.0
    z = math.tan(abs(alpha))
    cz = c_alpha * z
    mfz = mu * fz
    if cz >= 3.0 * mfz:
        return -sgn * mfz, 0.0
    q = cz / (3.0 * mfz)
    return -sgn * (cz * (1.0 - q + q * q / 3.0)), c_alpha * (1.0 - q) * (1.0 - q) * (1.0 + z * z)


@njit
def _soft(alpha, fz, c_alpha, mu):  # pragma: no cover - compiled
    fy, k = _brush(alpha, fz, 0.5 * c_alpha, mu)
    return fy, k


class Brush(TyreModel):
    """The saturating Fiala brush model, as a plug-in."""

    lateral = _brush


class Soft(TyreModel):
    """Half the cornering stiffness of the brush model."""

    lateral = _soft


class NoForce(TyreModel):
    """Forgets to provide its lateral force."""
