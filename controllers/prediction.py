"""Prediction of received states to the control instant (the first stage of ``controllers.pipeline``).

A CAM describes its sender at its generation time; by the time a follower acts on it, the sender has moved on for
the age of the information. ``controller.predict`` chooses what the law sees:

- ``none``: the sample as received;
- ``ctrv``: the sample moved forward by its age with constant turn rate and velocity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping

import numpy as np

from .columns import LazyColumns

Predictor = Callable[[Mapping[str, np.ndarray], np.ndarray], MutableMapping[str, np.ndarray]]


def predict_none(sample: Mapping[str, np.ndarray], age_s: np.ndarray) -> MutableMapping[str, np.ndarray]:
    """The sample as received (a shallow copy, so callers may add columns; columns not read yet stay unread)."""
    return sample.copy() if isinstance(sample, LazyColumns) else dict(sample)


def predict_ctrv(sample: Mapping[str, np.ndarray], age_s: np.ndarray) -> dict[str, np.ndarray]:
    """Received states moved forward by their age with constant turn rate and velocity (the CTRV motion model):
    x += v/w (sin(th + w dt) - sin th), y += v/w (cos th - cos(th + w dt)), th += w dt; straight for w -> 0.
    Ages that are not finite and positive (never received, or not older than now) leave the sample where it is."""
    dt = np.where(np.isfinite(age_s) & (age_s > 0), age_s, 0.0)
    v, w, th = sample["v"], sample["yaw_rate"], sample["yaw"]
    dth = w * dt
    small = np.abs(dth) < 1e-6
    safe_w = np.where(small, 1.0, w)
    dx = np.where(small, v * dt * np.cos(th + 0.5 * dth), v / safe_w * (np.sin(th + dth) - np.sin(th)))
    dy = np.where(small, v * dt * np.sin(th + 0.5 * dth), v / safe_w * (np.cos(th) - np.cos(th + dth)))
    out = dict(sample)
    out["x"], out["y"], out["yaw"] = sample["x"] + dx, sample["y"] + dy, th + dth
    return out


PREDICTORS: dict[str, Predictor] = {"none": predict_none, "ctrv": predict_ctrv}
"""``controller.predict`` values and their predictors."""
