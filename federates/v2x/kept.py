"""What a receiver keeps of its senders' CAMs when it drops some: the ITS-G5 model hands a platooning message's
delivery row the kinematics of the newest CAM the receiver holds from its sender (``comms_models.itsg5.pm``), also
of a CAM the receiver's detector made it drop. ``KeptCams`` hands such a row the kinematics of the newest CAM the
receiver kept instead, as if the dropped ones had never arrived (the mirror of ``Guard._untaint``, which does it
for a CAM row's platooning fields); without it a position attack that ``ignore`` drops reached the controller on
the attacker's platooning messages."""

from __future__ import annotations

import numpy as np

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
        new = np.setdiff1d(keys, self.keys)
        if len(new):
            merged = np.concatenate([self.keys, new])
            order = np.argsort(merged, kind="stable")
            m = len(new)
            self.keys = merged[order]
            self.gen = np.concatenate([self.gen, np.full(m, -1, np.int64)])[order]
            self.kin = np.concatenate([self.kin, np.full((m, len(KINEMATICS)), np.nan)])[order]
            self.last = np.concatenate([self.last, np.full(m, -1, np.int64)])[order]
            self.tainted = np.concatenate([self.tainted, np.zeros(m, bool)])[order]
        return np.searchsorted(self.keys, keys)

    def apply(self, deliveries: dict[str, np.ndarray], kind: np.ndarray, drop: np.ndarray
              ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """``deliveries`` (arrival order) with the kept platooning rows of pairs whose newest CAM was dropped
        carrying the newest kept CAM's kinematics, generated one ns after the pair's newest delivered row (the
        applications take a row only when it is newer), and ``drop`` with those of pairs that never had a CAM
        kept. The pairs' state follows every row."""
        keys = pair_keys(deliveries["receiver"], deliveries["sender"])
        at = self._rows(keys)
        cam = kind == 0
        involved = self.tainted[at] | (cam & drop)  # rows of pairs with a dropped CAM, before or now
        plain = ~np.isin(at, at[involved]) if involved.any() else np.ones(len(keys), bool)
        self._plain(at[plain], deliveries, np.flatnonzero(plain), cam, drop)
        rows = np.flatnonzero(~plain)
        if not len(rows):
            return deliveries, drop
        out = {name: np.array(col, copy=True) if name in (*KINEMATICS, "generated_ns") else col
               for name, col in deliveries.items()}
        drop = drop.copy()
        gen = np.asarray(deliveries["generated_ns"], np.int64)
        for r in rows.tolist():  # the few rows of pairs with a dropped CAM, in arrival order
            t = at[r]
            if drop[r]:
                self.tainted[t] |= bool(cam[r])
                continue
            if cam[r]:
                self.tainted[t] = False
                self.gen[t] = gen[r]
                self.kin[t] = [deliveries[name][r] for name in KINEMATICS]
                self.last[t] = max(self.last[t], gen[r])
            elif self.tainted[t] and self.gen[t] < 0:
                drop[r] = True  # nothing kept to hand it
            elif self.tainted[t]:
                for c, name in enumerate(KINEMATICS):
                    out[name][r] = self.kin[t, c]
                self.last[t] = max(self.last[t] + 1, self.gen[t] + 1)
                out["generated_ns"][r] = self.last[t]
            else:
                self.last[t] = max(self.last[t], gen[r])
        return out, drop

    def _plain(self, at: np.ndarray, deliveries: dict[str, np.ndarray], rows: np.ndarray, cam: np.ndarray,
               drop: np.ndarray) -> None:
        """The state after the rows of pairs without a dropped CAM (all kept): each pair's newest row."""
        kept = rows[~drop[rows]]
        if not len(kept):
            return
        gen = np.asarray(deliveries["generated_ns"], np.int64)
        t = at[~drop[rows]]
        np.maximum.at(self.last, t, gen[kept])
        cams = cam[kept]
        if cams.any():  # arrival order: the last assignment of a pair wins
            self.gen[t[cams]] = gen[kept[cams]]
            self.kin[t[cams]] = np.stack([np.asarray(deliveries[n], np.float64)[kept[cams]] for n in KINEMATICS], 1)
