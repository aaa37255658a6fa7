"""What a receiver keeps of its senders' CAMs when it drops some: the ITS-G5 model hands a platooning message's
delivery row the kinematics of the newest CAM the receiver holds from its sender (``comms_models.itsg5.pm``), also
of a CAM the receiver's detector made it drop. ``KeptCams`` hands such a row the kinematics of the newest CAM the
receiver kept instead, as if the dropped ones had never arrived (the mirror of ``Guard._untaint``, which does it
for a CAM row's platooning fields); without it a position attack that ``ignore`` drops reached the controller on
the attacker's platooning messages."""

from __future__ import annotations

import numpy as np
from numba import njit

from comms_models.misbehaviour.history import pair_keys

KINEMATICS = ("x", "y", "yaw", "v", "a", "yaw_rate")


class KeptCams:
    """Per (receiver, sender) pair: the newest kept CAM (generation time and kinematics), the newest generation
    time delivered, and whether the newest CAM was dropped. Pairs in a sorted key array."""

    def __init__(self) -> None:
        self.keys = np.empty(0, np.int64)
        self.gen = np.empty(0, np.int64)  # the newest kept CAM's generation time (-1: none)
        self.kin = np.empty((0, len(KINEMATICS)))
        self.last = np.empty(0, np.int64)  # the newest generation time handed to the applications
        self.tainted = np.empty(0, bool)  # the newest CAM was dropped

    def forget(self, ids: np.ndarray) -> None:
        """Drop the pairs of which a station of ``ids`` is either end."""
        keep = ~(np.isin(self.keys >> 32, ids) | np.isin(self.keys & 0xFFFFFFFF, ids))
        self.keys, self.gen, self.kin = self.keys[keep], self.gen[keep], self.kin[keep]
        self.last, self.tainted = self.last[keep], self.tainted[keep]

    def _rows(self, keys: np.ndarray) -> np.ndarray:
        """The table rows of ``keys``, new pairs added (nothing kept yet)."""
        if len(self.keys):
            at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
            if (self.keys[at] == keys).all():  # the usual step: no new pair
                return at
        new = np.setdiff1d(keys, self.keys)
        merged = np.concatenate([self.keys, new])
        order = np.argsort(merged, kind="stable")
        m = len(new)
        self.keys = merged[order]
        self.gen = np.concatenate([self.gen, np.full(m, -1, np.int64)])[order]
        self.kin = np.ascontiguousarray(np.concatenate([self.kin, np.full((m, len(KINEMATICS)), np.nan)])[order])
        self.last = np.concatenate([self.last, np.full(m, -1, np.int64)])[order]
        self.tainted = np.concatenate([self.tainted, np.zeros(m, bool)])[order]
        return np.searchsorted(self.keys, keys)

    def apply(self, deliveries: dict[str, np.ndarray], kind: np.ndarray, drop: np.ndarray
              ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """``deliveries`` (arrival order) with the kept platooning rows of pairs whose newest CAM was dropped
        carrying the newest kept CAM's kinematics, generated one ns after the pair's newest delivered row (the
        applications take a row only when it is newer), and ``drop`` with those of pairs that never had a CAM
        kept. The pairs' state follows every row (one compiled pass, ``_walk``)."""
        at = self._rows(pair_keys(deliveries["receiver"], deliveries["sender"]))
        kin = np.ascontiguousarray(np.stack([np.asarray(deliveries[name], np.float64) for name in KINEMATICS]))
        gen = np.array(deliveries["generated_ns"], np.int64)
        drop = np.array(drop, np.bool_)
        if not _walk(at, np.asarray(kind, np.int64), drop, gen, kin, self.tainted, self.gen, self.kin, self.last):
            return deliveries, drop
        out = dict(deliveries)
        out["generated_ns"] = gen
        for c, name in enumerate(KINEMATICS):
            out[name] = kin[c]
        return out, drop


@njit(cache=True)
def _walk(at, kind, drop, gen, kin, tainted, t_gen, t_kin, t_last):  # pragma: no cover - compiled
    """Every row in arrival order (``at``: its pair's table row): a dropped CAM taints its pair, a kept one clears
    it and is kept; a kept platooning row of a tainted pair gets the kept CAM's kinematics (``kin``, in place) and
    a generation time one ns after the pair's newest delivered one (``gen``), or is dropped when nothing was kept.
    True when a row changed."""
    changed = False
    for r in range(len(at)):
        t = at[r]
        if drop[r]:
            if kind[r] == 0:
                tainted[t] = True
        elif kind[r] == 0:
            tainted[t] = False
            t_gen[t] = gen[r]
            for c in range(kin.shape[0]):
                t_kin[t, c] = kin[c, r]
            t_last[t] = max(t_last[t], gen[r])
        elif tainted[t] and t_gen[t] < 0:
            drop[r] = True  # nothing kept to hand it
            changed = True
        elif tainted[t]:
            for c in range(kin.shape[0]):
                kin[c, r] = t_kin[t, c]
            t_last[t] = max(t_last[t] + 1, t_gen[t] + 1)
            gen[r] = t_last[t]
            changed = True
        else:
            t_last[t] = max(t_last[t], gen[r])
    return changed
