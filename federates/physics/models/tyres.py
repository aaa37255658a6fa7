"""Tyre force models: linear, Fiala (brush) with and without saturation, Pacejka magic formula, friction ellipse.

Sign conventions (SAE-like slip, ISO-like axes: x forward, y left, z up):

- Slip angle ``alpha`` [rad] is the angle from the wheel's heading to its velocity, positive counter-clockwise:
  ``alpha_f = atan((vy + a r) / vx) - delta``, ``alpha_r = atan((vy - b r) / vx)``. The lateral force opposes it,
  ``Fy = -f(alpha)`` with ``f`` odd and increasing near zero.
- Longitudinal slip ratio ``sigma = (r_e Omega - vx) / max(|vx|, eps)`` [-]: positive when driving (wheel faster than
  the ground), negative when braking. The longitudinal force has the sign of ``sigma``.

Every model comes twice: a numpy function over arrays here (plots, tests, analysis) and a scalar ``@njit`` function
in ``dynamic_kernel.py``, the file of the vehicle kernel that inlines it (numba's cache checks only that file). The
numpy and scalar versions are checked against each other in ``tests/physics``.

Sources: Pacejka, *Tire and Vehicle Dynamics*, 3rd ed., eq. 4.49 (magic formula); Fiala (1954) brush model in the form
of Pacejka eq. 3.20 / Rajamani, *Vehicle Dynamics and Control*, 2nd ed., sec. 13.4; friction ellipse as in Rajamani
sec. 13.8 (combined slip).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from core.registry import Registry

from .dynamic_kernel import TYRE_FIALA, TYRE_FIALA_UNSATURATED, TYRE_LINEAR, TYRE_PACEJKA, TYRE_PLUGIN


class TyreModel:
    """A tyre model the dynamic single-track model can use: ``vehicle.params.tyre_model`` names it.

    ``code`` is the integer the compiled kernel switches on: each built-in class carries its own, so the name ->
    code table is the registry itself (``TYRE_MODELS``). A plug-in subclass keeps ``TYRE_PLUGIN`` and sets
    ``lateral`` to a numba-compiled function ``(alpha, fz, c_alpha, mu) -> (fy, k)``: the lateral force [N] of one
    axle at slip angle ``alpha`` [rad] under load ``fz`` [N] (``fy`` opposes ``alpha``, see the module docstring)
    and the local cornering stiffness ``k = -dfy/dalpha`` [N/rad] (the implicit lateral step needs it).
    ``c_alpha`` is the axle's ``cornering_stiffness_*_npr`` and ``mu`` the friction coefficient; the friction
    ellipse and the longitudinal slip work on ``mu`` as for the Fiala model.
    """

    code: ClassVar[int] = TYRE_PLUGIN
    lateral: ClassVar[Any] = None


def _builtin(name: str, code: int) -> type[TyreModel]:
    return type(name, (TyreModel,), {"code": code, "__doc__": f"The built-in '{name}' tyre model (compiled)."})


Linear = _builtin("linear", TYRE_LINEAR)
Fiala = _builtin("fiala", TYRE_FIALA)
FialaUnsaturated = _builtin("fiala_unsaturated", TYRE_FIALA_UNSATURATED)
Pacejka = _builtin("pacejka", TYRE_PACEJKA)

TYRE_MODELS = Registry(
    "tyre model",
    {"linear": f"{__name__}:Linear", "fiala": f"{__name__}:Fiala",
     "fiala_unsaturated": f"{__name__}:FialaUnsaturated", "pacejka": f"{__name__}:Pacejka"},
    group="coopsim.tyre_models",
    base=f"{__name__}:TyreModel",
)
"""Tyre models by name: the built-ins, installed ``coopsim.tyre_models`` entry points, ``package.module:Class``;
each class's ``code`` is what the kernel switches on."""


def resolve_tyre(name: str) -> type[TyreModel]:
    """The tyre model class ``name`` selects; a plug-in must provide its compiled ``lateral``. An unknown name
    raises ``KeyError`` (``core.registry.UnknownNameError``) listing the valid ones."""
    cls = TYRE_MODELS.get(name)
    if cls.code == TYRE_PLUGIN and cls.lateral is None:
        raise ValueError(f"tyre model '{name}' sets no 'lateral' (a numba-compiled (alpha, fz, c_alpha, mu) -> "
                         f"(fy, stiffness))")
    return cls


def tyre_code(name: str) -> int:
    """The kernel code of a built-in tyre model (the numpy forces below exist for those only); unknown names list
    the valid ones."""
    if name not in TYRE_MODELS.builtin_names():
        raise KeyError(f"unknown tyre model '{name}'; allowed: {', '.join(TYRE_MODELS.builtin_names())}")
    return TYRE_MODELS.get(name).code


def linear_lateral(alpha: np.ndarray, c_alpha: float | np.ndarray) -> np.ndarray:
    """Linear tyre ``Fy = -C alpha`` [N]; ``c_alpha`` cornering stiffness [N/rad]."""
    return -np.asarray(c_alpha) * np.asarray(alpha, dtype=np.float64)


def fiala_lateral(
    alpha: np.ndarray, c_alpha: float | np.ndarray, mu: float | np.ndarray, fz: float | np.ndarray,
    saturate: bool = True,
) -> np.ndarray:
    """Fiala brush tyre ``Fy`` [N] for slip angle ``alpha`` [rad], cornering stiffness ``c_alpha`` [N/rad], friction
    ``mu`` [-] and normal load ``fz`` [N].

    With ``z = tan|alpha|``: ``Fy = -sign(alpha) C z (1 - C z / (3 mu Fz) + (C z)^2 / (27 (mu Fz)^2))`` below the
    sliding limit ``atan(3 mu Fz / C)`` and ``-sign(alpha) mu Fz`` beyond it. ``saturate=False`` keeps the cubic
    everywhere: with ``q = C z / (3 mu Fz)`` the magnitude is ``mu Fz (1 - (1 - q)^3)``, which touches ``mu Fz`` with
    zero slope at the limit and grows again beyond it.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    z = np.tan(np.abs(alpha))
    cz = np.asarray(c_alpha) * z
    mfz = np.asarray(mu) * np.asarray(fz)
    mag = cz * (1.0 - cz / (3.0 * mfz) + cz**2 / (27.0 * mfz**2))
    if saturate:
        mag = np.where(cz >= 3.0 * mfz, mfz * np.ones_like(cz), mag)
    return -np.sign(alpha) * mag


def pacejka(x: np.ndarray, b: float, c: float, d: float, e: float) -> np.ndarray:
    """Magic formula ``D sin(C atan(B x - E (B x - atan(B x))))`` (Pacejka eq. 4.49), odd in ``x``; units of ``d``."""
    bx = b * np.asarray(x, dtype=np.float64)
    return d * np.sin(c * np.arctan(bx - e * (bx - np.arctan(bx))))


def pacejka_lateral(alpha: np.ndarray, b: float, c: float, d: float, e: float, fz: float | np.ndarray) -> np.ndarray:
    """Lateral magic-formula force [N]: ``-Fz * pacejka(alpha)`` with ``d`` the peak friction coefficient [-]."""
    return -np.asarray(fz) * pacejka(alpha, b, c, d, e)


def pacejka_longitudinal(
    sigma: np.ndarray, b: float, c: float, d: float, e: float, fz: float | np.ndarray,
) -> np.ndarray:
    """Longitudinal magic-formula force [N]: ``Fz * pacejka(sigma)`` with ``d`` the peak friction coefficient [-]."""
    return np.asarray(fz) * pacejka(sigma, b, c, d, e)


def friction_ellipse(
    fx: np.ndarray, fy: np.ndarray, fx_max: float | np.ndarray, fy_max: float | np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Combined slip by friction-ellipse scaling: if ``(fx/fx_max)^2 + (fy/fy_max)^2 > 1`` both forces are scaled by
    the same factor onto the ellipse (direction kept), else returned unchanged."""
    fx = np.asarray(fx, dtype=np.float64)
    fy = np.asarray(fy, dtype=np.float64)
    s = np.sqrt((fx / fx_max) ** 2 + (fy / fy_max) ** 2)
    k = np.where(s > 1.0, 1.0 / np.maximum(s, 1.0), 1.0)
    return fx * k, fy * k


def lateral_force(
    model: str, alpha: np.ndarray, fz: float | np.ndarray, c_alpha: float, mu: float,
    pac: tuple[float, float, float, float] = (10.0, 1.45, 1.0, 0.97),
) -> np.ndarray:
    """Lateral force [N] of the named model (``linear``, ``fiala``, ``fiala_unsaturated``, ``pacejka``); ``pac`` is
    ``(B, C, D, E)`` with ``D`` a friction coefficient."""
    code = tyre_code(model)
    if code == TYRE_LINEAR:
        return linear_lateral(alpha, c_alpha)
    if code in (TYRE_FIALA, TYRE_FIALA_UNSATURATED):
        return fiala_lateral(alpha, c_alpha, mu, fz, saturate=code == TYRE_FIALA)
    return pacejka_lateral(alpha, *pac, fz)
