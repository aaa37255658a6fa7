"""The copy of the vehicle state the physics federate publishes at every step, made in one compiled pass that also
tells whether the state stayed finite (instead of seven copies and three sums)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numba import njit

_ORDER = ("x", "y", "yaw", "v", "a", "yaw_rate", "steer")  # the kernel's argument order


@njit(cache=True)
def _copy_state(x, y, yaw, v, a, yaw_rate, steer, out):  # pragma: no cover - compiled
    """Copies the seven columns into the rows of ``out``; True when every x, y and v is finite."""
    finite = True
    for i in range(x.shape[0]):
        out[0, i] = x[i]
        out[1, i] = y[i]
        out[2, i] = yaw[i]
        out[3, i] = v[i]
        out[4, i] = a[i]
        out[5, i] = yaw_rate[i]
        out[6, i] = steer[i]
        if not (np.isfinite(x[i]) and np.isfinite(y[i]) and np.isfinite(v[i])):
            finite = False
    return finite


def state_snapshot(state: Mapping[str, np.ndarray], keys: Sequence[str]) -> tuple[dict[str, np.ndarray], bool]:
    """New copies of the state columns ``keys`` (``x, y, yaw, v, a, yaw_rate, steer`` in this order: the rows of
    one new array) and whether x, y and v are all finite. Columns of another type or shape are copied one by one."""
    columns = [state[key] for key in keys]
    if tuple(keys) == _ORDER and all(c.dtype == np.float64 and c.ndim == 1 for c in columns):
        block = np.empty((7, len(columns[0])))
        finite = _copy_state(*columns, block)
        return {key: block[k] for k, key in enumerate(keys)}, bool(finite)
    copies = {key: column.copy() for key, column in zip(keys, columns, strict=True)}
    finite = bool(np.isfinite(state["x"]).all() and np.isfinite(state["y"]).all() and np.isfinite(state["v"]).all())
    return copies, finite
