"""``federates.v2x.kept.KeptCams``: under the ``ignore`` reaction a platooning message's row carries the kinematics
of the newest CAM the receiver kept from its sender, not those of a CAM it dropped (which the ITS-G5 model hands
it), generated one ns after the newest row delivered, until a CAM of the pair is kept again."""

from __future__ import annotations

import numpy as np

from federates.v2x.kept import KINEMATICS, KeptCams

MS = 1_000_000


def rows(*items: tuple[int, int, float]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Deliveries from sender 1 to receiver 2: (kind, generated_ns, x) per row; the other kinematics x / 10."""
    kind = np.array([k for k, _, _ in items], np.int64)
    out = {"receiver": np.full(len(items), 2, np.int64), "sender": np.full(len(items), 1, np.int64),
           "generated_ns": np.array([g for _, g, _ in items], np.int64)}
    for name in KINEMATICS:
        out[name] = np.array([x if name == "x" else x / 10 for _, _, x in items], np.float64)
    return out, kind


def test_a_pm_row_after_a_dropped_cam_carries_the_kept_one() -> None:
    kept = KeptCams()
    d, kind = rows((0, 100 * MS, 10.0), (1, 100 * MS + 1, 10.0))  # a CAM kept, a PM riding on it
    out, drop = kept.apply(d, kind, np.zeros(2, bool))
    assert out is d and not drop.any()
    # a forged CAM dropped, then two PMs riding on it (the model's rows: its kinematics, its time + n)
    d, kind = rows((0, 200 * MS, 500.0), (1, 200 * MS + 1, 500.0), (1, 200 * MS + 2, 500.0))
    out, drop = kept.apply(d, kind, np.array([True, False, False]))
    np.testing.assert_array_equal(drop, [True, False, False])
    np.testing.assert_array_equal(out["x"][1:], [10.0, 10.0])
    np.testing.assert_array_equal(out["v"][1:], [1.0, 1.0])
    np.testing.assert_array_equal(out["generated_ns"][1:], [100 * MS + 2, 100 * MS + 3])  # newer than delivered
    assert d["x"][1] == 500.0  # the caller's columns stay as they were
    # a CAM kept again: the rows are the model's once more
    d, kind = rows((0, 300 * MS, 30.0), (1, 300 * MS + 1, 30.0))
    out, drop = kept.apply(d, kind, np.zeros(2, bool))
    np.testing.assert_array_equal(out["x"], [30.0, 30.0])
    np.testing.assert_array_equal(out["generated_ns"], [300 * MS, 300 * MS + 1])


def test_within_a_step_the_order_of_arrival_counts() -> None:
    kept = KeptCams()
    d, kind = rows((0, 100 * MS, 10.0), (0, 200 * MS, 500.0), (1, 200 * MS + 1, 500.0), (0, 300 * MS, 30.0),
                   (1, 300 * MS + 1, 30.0))
    out, drop = kept.apply(d, kind, np.array([False, True, False, False, False]))
    np.testing.assert_array_equal(out["x"], [10.0, 500.0, 10.0, 30.0, 30.0])
    np.testing.assert_array_equal(out["generated_ns"][2], 100 * MS + 1)
    assert not drop[2:].any()


def test_a_pm_row_of_a_pair_with_no_kept_cam_is_dropped() -> None:
    kept = KeptCams()
    d, kind = rows((0, 100 * MS, 500.0), (1, 100 * MS + 1, 500.0))
    _, drop = kept.apply(d, kind, np.array([True, False]))
    np.testing.assert_array_equal(drop, [True, True])
