"""The newest V2X sample each robot holds about one other robot (its predecessor or its leader), from ``cam_rx``.

Late or reordered messages never overwrite fresher data: a delivery is kept only when it comes from the sender its
receiver wants and was generated after what the receiver holds.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numba import njit

from controllers.columns import LazyColumns
from core.rowtable import RowTable
from core.timebase import NS_PER_S

RX_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate", "u_des")
"""The ``cam_rx`` columns a control law may use, in the row order of ``Received.held``."""


@njit(cache=True)
def receive_kernel(receiver, sender, generated, fields, row_of_id, wanted_sender, held_gen, held):  # pragma: no cover
    """For each delivery whose sender is the one its receiver wants and that is newer than what the receiver holds,
    store it (``row_of_id``: row of each robot id, -1 when not ours; ``fields``: one array per held field, or a 2-D
    array with one row per field)."""
    for j in range(receiver.shape[0]):
        rid = receiver[j]
        if rid < 0 or rid >= row_of_id.shape[0]:
            continue
        row = row_of_id[rid]
        if row < 0 or wanted_sender[row] != sender[j] or generated[j] <= held_gen[row]:
            continue
        held_gen[row] = generated[j]
        for f in range(len(fields)):
            held[f, row] = fields[f][j]


@njit(cache=True)
def receive_pair_kernel(receiver, sender, generated, fields, row_of_id, wanted_a, held_gen_a, held_a, wanted_b,
                        held_gen_b, held_b):  # pragma: no cover - compiled
    """``receive_kernel`` into two holders (e.g. the predecessor's and the leader's samples) in one pass over the
    deliveries; each holder takes exactly what ``receive_kernel`` alone would."""
    for j in range(receiver.shape[0]):
        rid = receiver[j]
        if rid < 0 or rid >= row_of_id.shape[0]:
            continue
        row = row_of_id[rid]
        if row < 0:
            continue
        if wanted_a[row] == sender[j] and generated[j] > held_gen_a[row]:
            held_gen_a[row] = generated[j]
            for f in range(len(fields)):
                held_a[f, row] = fields[f][j]
        if wanted_b[row] == sender[j] and generated[j] > held_gen_b[row]:
            held_gen_b[row] = generated[j]
            for f in range(len(fields)):
                held_b[f, row] = fields[f][j]


@njit(cache=True)
def ages_kernel(generated_ns, rows, all_rows, t_ns, ns_per_s, never, out):  # pragma: no cover - compiled
    """``out[k]`` = age [s] at ``t_ns`` of the sample held by row ``rows[k]`` (every row in order when
    ``all_rows``), ``never`` where nothing was received: (t_ns - generated) / ns_per_s as numpy divides integers."""
    for k in range(out.shape[0]):
        gen = generated_ns[k] if all_rows else generated_ns[rows[k]]
        out[k] = (t_ns - gen) / ns_per_s if gen >= 0 else never


PEER_FIELDS = ("maneuver", "maneuver_peer", "platoon_id", "platoon_index", "x", "y", "yaw", "v")
"""The ``cam_rx`` columns a maneuver partner's message is read for (``Received(PEER_FIELDS)``)."""


class Received(RowTable):
    """Newest received sample per robot row about one other robot; ``wanted`` holds that robot's id per row
    (-1: none). ``fields``: the ``cam_rx`` columns kept (``RX_FIELDS``: what a control law uses)."""

    ROW_COLUMNS = ("wanted", "generated_ns")  # ``held`` is (fields, rows): kept beside them

    def __init__(self, fields: tuple[str, ...] = RX_FIELDS) -> None:
        self.fields = fields
        self.wanted = np.empty(0, np.int64)
        self.generated_ns = np.empty(0, np.int64)  # -1: nothing received yet
        self.held = np.empty((len(fields), 0))  # one row per field, one column per robot
        self.values: dict[str, np.ndarray] = {}  # views of ``held`` by field name
        self._views()

    def _views(self) -> None:
        self.values = {name: self.held[f] for f, name in enumerate(self.fields)}

    def rows(self, rows: np.ndarray) -> LazyColumns:
        """The held samples of some robots, by field name; each field is gathered when first read (a law that
        never reads the leader's sample does not pay for it)."""
        held = self.held
        index = {name: f for f, name in enumerate(self.fields)}
        return LazyColumns(self.fields, lambda name: held[index[name]][rows], (lambda name: held[index[name]], rows))

    def retarget(self, row: int, sender: int) -> None:
        """Row ``row`` wants samples from robot ``sender`` from now on (-1: none); what it held is forgotten."""
        if self.wanted[row] == sender:
            return
        self.wanted[row] = sender
        self.generated_ns[row] = -1
        self.held[:, row] = np.nan

    def age_s(self, t_ns: int, rows: np.ndarray | slice = slice(None), never: float = np.inf) -> np.ndarray:
        """Age [s] at ``t_ns`` of the held samples of ``rows``; ``never`` where nothing was received."""
        if isinstance(rows, slice):
            if rows != slice(None):
                gen = self.generated_ns[rows]
                return np.where(gen >= 0, (t_ns - gen) / NS_PER_S, never)
            out = np.empty(len(self.generated_ns))
            ages_kernel(self.generated_ns, self.generated_ns, True, t_ns, NS_PER_S, float(never), out)
            return out
        out = np.empty(len(rows))
        ages_kernel(self.generated_ns, np.asarray(rows, np.int64), False, t_ns, NS_PER_S, float(never), out)
        return out

    def add(self, wanted: np.ndarray) -> None:
        """Rows for new robots at the end, each wanting samples from the robot id in ``wanted`` (-1: none)."""
        n = len(wanted)
        self.append_rows(wanted=np.asarray(wanted, np.int64), generated_ns=np.full(n, -1, np.int64))
        self.held = np.ascontiguousarray(np.hstack([self.held, np.full((len(self.fields), n), np.nan)]))
        self._views()

    def remove(self, keep: np.ndarray) -> None:
        """Keeps the rows where the mask ``keep`` is True."""
        self.keep_rows(keep)
        self.held = np.ascontiguousarray(self.held[:, keep])
        self._views()

    def receive(self, rx: Mapping[str, np.ndarray], fields: np.ndarray | tuple[np.ndarray, ...],
                row_of_id: np.ndarray, also: Received | None = None) -> None:
        """Takes the deliveries of ``rx`` addressed to each row from the sender it wants (``fields``: the
        ``self.fields`` columns of ``rx``, stacked or one array each; ``row_of_id``: a robot id's row, -1 when not
        ours, e.g. ``rows_of(ids, np.arange(max(ids) + 1), missing=-1)`` built once per roster change). ``also``:
        another holder of the same fields and rows that takes its own deliveries in the same pass."""
        receiver = np.asarray(rx["receiver"], np.int64)
        sender = np.asarray(rx["sender"], np.int64)
        generated = np.asarray(rx["generated_ns"], np.int64)
        if also is None:
            receive_kernel(receiver, sender, generated, fields, row_of_id, self.wanted, self.generated_ns, self.held)
        else:
            receive_pair_kernel(receiver, sender, generated, fields, row_of_id, self.wanted, self.generated_ns,
                                self.held, also.wanted, also.generated_ns, also.held)
