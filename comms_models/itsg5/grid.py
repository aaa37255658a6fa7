"""The spatial index of the ITS-G5 medium: a uniform grid whose cells are at least the cut-off radius wide, so the
3x3 cells around a sender hold every station within the radius (``radio.cutoff_radius_m``)."""

from __future__ import annotations

import numpy as np


def build_grid(x: np.ndarray, y: np.ndarray, radius_m: float) -> tuple[float, float, float, int, int, np.ndarray,
                                                                           np.ndarray]:
    """A uniform grid over the stations with cells of at least ``radius_m`` (a fixed-radius spatial index: the
    3x3 cells around a sender hold every station within the radius). Returns ``(x0, y0, cell_m, ncx, ncy,
    cell_start, cell_items)`` in CSR form."""
    n = len(x)
    if n == 0:
        return 0.0, 0.0, 1.0, 1, 1, np.zeros(2, np.int64), np.empty(0, np.int64)
    x0, y0 = float(x.min()), float(y.min())
    span_x, span_y = float(x.max()) - x0, float(y.max()) - y0
    cell = max(radius_m, 1e-3)
    # Never more cells than a few per station: a larger cell is still correct, just less selective.
    while (span_x / cell + 1.0) * (span_y / cell + 1.0) > 4 * n + 16:
        cell *= 2.0
    ncx = int(span_x / cell) + 1
    ncy = int(span_y / cell) + 1
    cx = np.minimum(((x - x0) / cell).astype(np.int64), ncx - 1)
    cy = np.minimum(((y - y0) / cell).astype(np.int64), ncy - 1)
    key = cy * ncx + cx
    items = np.argsort(key, kind="stable")
    start = np.zeros(ncx * ncy + 1, np.int64)
    np.cumsum(np.bincount(key, minlength=ncx * ncy), out=start[1:])
    return x0, y0, cell, ncx, ncy, start, items
