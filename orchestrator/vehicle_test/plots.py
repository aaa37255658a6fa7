"""PNG plots of the handling tests: lateral velocity and yaw rate over time, paths, force-slip curves with the operating
points, and the understeer plot of the constant-radius test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from federates.physics.models.dynamic_kernel import G_MPS2
from federates.physics.models.tyres import lateral_force

from .simulate import Run


def plot_timeseries(run: Run, tyres: list[str], title: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for j, name in enumerate(tyres):
        ax[0].plot(run.t[:, j], run.vy[:, j], label=name)
        ax[1].plot(run.t[:, j], run.r[:, j], label=name)
    ax[0].set(xlabel="t [s]", ylabel="lateral velocity at CG vy [m/s]", title="lateral velocity")
    ax[1].set(xlabel="t [s]", ylabel="yaw rate r [rad/s]", title="yaw rate")
    for a in ax:
        a.grid(True, alpha=0.3)
        a.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_path(run: Run, tyres: list[str], ref: np.ndarray | None, title: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4))
    if ref is not None:
        ax.plot(ref[:, 0], ref[:, 1], "k--", lw=1, label="reference")
    for j, name in enumerate(tyres):
        ax.plot(run.x[:, j], run.y[:, j], label=name)
    ax.set(xlabel="x [m]", ylabel="y [m]", title=title)
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_tyres(run: Run, tyres: list[str], p: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    L, a, m = p["wheelbase_m"], p["cg_to_front_m"], p["mass_kg"]
    loads = {"front": m * G_MPS2 * (L - a) / L, "rear": m * G_MPS2 * a / L}
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    alpha = np.linspace(-0.3, 0.3, 601)
    for k, axle in enumerate(("front", "rear")):
        c = p[f"cornering_stiffness_{axle}_npr"]
        pac = tuple(p.get(f"pacejka_lat_{axle}") or (1.0, 1.0, p["mu"], 0.0))
        for j, name in enumerate(tyres):
            line = ax[k].plot(np.degrees(alpha), lateral_force(name, alpha, loads[axle], c, p["mu"], pac),
                              label=name)
            op_a = run.alpha_f[:, j] if axle == "front" else run.alpha_r[:, j]
            op_f = run.fy_f[:, j] if axle == "front" else run.fy_r[:, j]
            ax[k].plot(np.degrees(op_a), op_f, ".", ms=2, color=line[0].get_color(), alpha=0.4)
        lim = 1.3 * p["mu"] * loads[axle]
        ax[k].set(xlabel="slip angle [deg]", ylabel="lateral force [N]", ylim=(-lim, lim),
                  title=f"{axle} axle, Fz = {loads[axle]:.0f} N (dots: operating points)")
        ax[k].grid(True, alpha=0.3)
        ax[k].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_understeer(run: Run, tyres: list[str], p: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for j, name in enumerate(tyres):
        ax.plot(run.vx[:, j] * run.r[:, j], np.degrees(run.steer[:, j]), label=name)
    ax.set(xlabel="lateral acceleration vx r [m/s^2]", ylabel="steer angle [deg]",
           title=f"constant radius, mu g = {p['mu'] * G_MPS2:.2f} m/s^2")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
