"""Seeded and event-keyed randomness: independence from the roster, bounds, and the kernel's copy of the hash."""

from __future__ import annotations

import numpy as np
import pytest

from core.rng import (
    KeyedDraws,
    KeyedNormal,
    event_key,
    id_hash,
    keyed_u01,
    keyed_u01_from,
    purpose_key,
    stream,
)


def test_streams_differ_by_label_and_repeat_by_seed():
    a = stream(7, "physics", "imu_bias", 3).normal(size=4)
    assert np.array_equal(a, stream(7, "physics", "imu_bias", 3).normal(size=4))
    assert not np.array_equal(a, stream(7, "physics", "imu_bias", 4).normal(size=4))
    assert not np.array_equal(a, stream(8, "physics", "imu_bias", 3).normal(size=4))


def test_keyed_normal_does_not_depend_on_the_roster_and_has_unit_variance():
    big = KeyedNormal(42, "physics", "odometry")
    big.ids = np.arange(1, 20001)
    big.at(1_000_000)
    draws = big.standard_normal((2, 20000))
    assert abs(draws.mean()) < 0.02 and abs(draws.std() - 1.0) < 0.02
    assert abs(np.corrcoef(draws[0], draws[1])[0, 1]) < 0.03  # the two Box-Muller branches
    small = KeyedNormal(42, "physics", "odometry")
    small.ids = np.array([150, 3, 77])
    small.at(1_000_000)
    assert np.array_equal(small.standard_normal((2, 3)), draws[:, [149, 2, 76]])
    small.at(2_000_000)
    assert not np.array_equal(small.standard_normal((2, 3)), draws[:, [149, 2, 76]])  # another tick
    with pytest.raises(ValueError, match="keyed noise needs shape"):
        small.standard_normal((3, 2))


def test_the_kernels_hash_is_the_shared_one():
    key = purpose_key(5, "v2x", "radio")
    rng = np.random.default_rng(0)
    for sender, receiver, gen in rng.integers(0, 2**40, size=(200, 3)):
        expected = keyed_u01(key, sender, receiver, gen)
        receiver_hash = np.uint64(id_hash(receiver))  # numba returns Python ints; keep them unsigned 64-bit
        assert keyed_u01_from(np.uint64(event_key(key, sender, gen)), receiver_hash) == expected


def test_keyed_draws_are_bounded_and_per_event():
    key = purpose_key(1, "v2x", "mac")
    events = np.arange(50000)
    draws = KeyedDraws(key, events, None, np.full(50000, 10))
    u = draws.random(50000)
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01
    backoff = draws.integers(0, 16, 50000)
    assert backoff.min() == 0 and backoff.max() == 15
    first = KeyedDraws(key, events[:10], None, np.full(10, 10)).integers(0, 16, 10)
    assert np.array_equal(first, backoff[:10])  # an event's draw does not depend on the batch it is in
    with pytest.raises(ValueError, match="per event"):
        draws.uniform(0.0, 1.0, 3)
