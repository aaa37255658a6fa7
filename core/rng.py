"""Seeded randomness, never global state.

- ``stream(seed, *labels)``: an independent numpy Generator per (seed, federate, purpose, robot), derived with
  SeedSequence; for per-robot constants (biases, scale errors, start offsets).
- ``KeyedNormal`` / ``KeyedDraws`` / ``keyed_u01``: draws that are a hash (SplitMix64) of the event they belong
  to, e.g. (seed, purpose, robot, time) or (seed, purpose, sender, receiver, generation time); for per-step
  noise and per-link channel draws. No draw depends on how many robots exist.

Results are bit-identical on the same platform; across CPUs or maths libraries the floating-point functions
used to shape the draws (log, sin, cos) may differ in the last bit.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np
from numba import njit


def _key(label: str | int) -> int:
    if isinstance(label, int):
        return label
    return zlib.crc32(label.encode("utf-8"))


def stream(seed: int, *labels: str | int) -> np.random.Generator:
    """A Generator determined only by the scenario seed and the labels (federate name, robot id, purpose)."""
    entropy = [int(seed) & 0xFFFFFFFF, *(_key(label) for label in labels)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


@njit(cache=True)
def _splitmix64(x):  # pragma: no cover - compiled
    # SplitMix64 finaliser (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014)
    x = np.uint64(x)  # int64 arguments (e.g. from Python) would otherwise mix into float64
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def _robot_keys(base, ids, out):  # pragma: no cover - compiled
    for j in range(ids.shape[0]):
        out[j] = _splitmix64(base ^ _splitmix64(np.uint64(ids[j])))


@njit(cache=True)
def _keyed_normals(robot_keys, tick, call, k, out):  # pragma: no cover - compiled
    """out[c, j] ~ N(0, 1), a function of (robot_keys[j], tick, call, c) only. Box-Muller on the two 32-bit halves
    of one hash gives a pair of normals (cos and sin branch)."""
    t = _splitmix64(np.uint64(tick)) ^ _splitmix64(np.uint64(call) + np.uint64(0x2545F4914F6CDD1D))
    scale = 1.0 / 4294967296.0
    for j in range(robot_keys.shape[0]):
        h_tick = _splitmix64(robot_keys[j] ^ t)
        for c in range(0, k, 2):
            h = _splitmix64(h_tick ^ np.uint64(c))
            u1 = (float(h >> np.uint64(32)) + 1.0) * scale  # (0, 1]: log is finite
            u2 = float(h & np.uint64(0xFFFFFFFF)) * scale
            r = np.sqrt(-2.0 * np.log(u1))
            out[c, j] = r * np.cos(2.0 * np.pi * u2)
            if c + 1 < k:
                out[c + 1, j] = r * np.sin(2.0 * np.pi * u2)


class KeyedNormal:
    """Per-robot white noise: each draw depends only on (seed, labels, robot id, tick, call within the tick,
    component), never on how many robots exist or in which order they were drawn.

    The owner sets ``ids`` (robot ids, in its row order) and calls ``at(tick)`` once per step (e.g. with the
    simulation time in ns) before drawing. Draws within one tick are numbered in call order, so a sensor draws
    all its channels of a step in one call (one stream per sensor and purpose). ``standard_normal(size)`` has the
    Generator signature for the shapes sensors use: ``(n,)`` or ``(k, n)`` with n = len(ids) robots on the last
    axis.
    """

    def __init__(self, seed: int, *labels: str | int) -> None:
        key = int(seed) & 0xFFFFFFFFFFFFFFFF
        for label in labels:
            key = ((key * 0x100000001B3) ^ _key(label)) & 0xFFFFFFFFFFFFFFFF
        self._base = np.uint64(key)
        self._ids = np.empty(0, np.int64)
        self._robot_keys = np.empty(0, np.uint64)
        self._tick = 0
        self._call = 0

    @property
    def ids(self) -> np.ndarray:
        """Robot ids in the owner's row order."""
        return self._ids

    @ids.setter
    def ids(self, ids: np.ndarray) -> None:
        self._ids = np.asarray(ids, np.int64)
        self._robot_keys = np.empty(len(self._ids), np.uint64)
        _robot_keys(self._base, self._ids, self._robot_keys)

    def at(self, tick: int) -> None:
        """Start drawing for a new tick (the call counter restarts)."""
        self._tick = int(tick)
        self._call = 0

    def standard_normal(self, size: int | tuple[int, ...]) -> np.ndarray:
        """Standard normals of shape ``size``; the last axis must be the robots."""
        return self.deferred_standard_normal(size)()

    def deferred_standard_normal(self, size: int | tuple[int, ...]) -> Callable[[], np.ndarray]:
        """``standard_normal(size)`` taken now (it counts as this tick's next call) but computed when the returned
        function is called, e.g. only if someone reads the noisy values: the draws depend on the key alone, so
        they are the same whenever they are computed."""
        shape = (size,) if isinstance(size, int) else tuple(size)
        n = len(self.ids)
        if not shape or shape[-1] != n or len(shape) > 2:
            raise ValueError(f"keyed noise needs shape (n,) or (k, n) with n = {n} robots, got {shape}")
        k = shape[0] if len(shape) == 2 else 1
        robot_keys, tick, call = self._robot_keys, self._tick, self._call  # replaced, never mutated, on new ids
        self._call += 1

        def draw() -> np.ndarray:
            out = np.empty((k, n))
            _keyed_normals(robot_keys, tick, call, k, out)
            return out.reshape(shape)

        return draw

    def normal(self, loc: float, scale: float, size: int | tuple[int, ...]) -> np.ndarray:
        """``loc + scale * standard_normal(size)``."""
        return loc + scale * self.standard_normal(size)


@njit(cache=True, inline="always")
def event_key(key, a, c):  # pragma: no cover - compiled
    """The part of ``keyed_u01(key, a, b, c)`` that does not depend on ``b``: hash it once per event (e.g. per
    frame), then ``keyed_u01_from(event, id_hash(b))`` per receiver gives the same value as ``keyed_u01``."""
    return _splitmix64(_splitmix64(np.uint64(key) ^ _splitmix64(np.uint64(a))) ^ np.uint64(c))


@njit(cache=True, inline="always")
def id_hash(b):  # pragma: no cover - compiled
    """Per-id part of ``keyed_u01`` (precompute it for every station)."""
    return _splitmix64(np.uint64(b) + np.uint64(0x5851F42D4C957F2D))


@njit(cache=True, inline="always")
def keyed_u01_from(event, b_hash):  # pragma: no cover - compiled
    """``keyed_u01`` from a precomputed ``event_key`` and ``id_hash``: one mix per (event, id)."""
    return float(_splitmix64(np.uint64(event) ^ np.uint64(b_hash)) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def id_hashes(ids, out):  # pragma: no cover - compiled
    """``id_hash`` of every id."""
    for j in range(ids.shape[0]):
        out[j] = id_hash(ids[j])


@njit(cache=True, inline="always")
def keyed_u01(key, a, b, c):  # pragma: no cover - compiled
    """A uniform in [0, 1) that is a function of (key, a, b, c) only (for compiled kernels: e.g. key of the
    purpose, sender id, receiver id, generation time)."""
    return keyed_u01_from(event_key(key, a, c), id_hash(b))


@njit(cache=True)
def _keyed_u01_array(key, a, b, c, out):  # pragma: no cover - compiled
    for j in range(out.shape[0]):
        out[j] = keyed_u01(key, a[j], b[j], c[j])


def purpose_key(seed: int, *labels: str | int) -> np.uint64:
    """The 64-bit key of a purpose (e.g. ``purpose_key(seed, "v2x", "radio")``) for ``keyed_u01``."""
    key = int(seed) & 0xFFFFFFFFFFFFFFFF
    for label in labels:
        key = ((key * 0x100000001B3) ^ _key(label)) & 0xFFFFFFFFFFFFFFFF
    return np.uint64(key)


class KeyedDraws:
    """Generator-like draws for a batch of events, each a function of (purpose key, a, b, c) of that event
    only: ``KeyedDraws(key, sender_ids, receiver_ids, generated_ns).uniform(0.001, 0.003, n)``."""

    def __init__(self, key: np.uint64, a: np.ndarray, b: np.ndarray | None = None, c: np.ndarray | None = None):
        self.key = key
        n = len(a)
        self._cols = [np.asarray(col if col is not None else np.zeros(n), np.int64) for col in (a, b, c)]

    def _u(self, salt: int) -> np.ndarray:
        a, b, c = self._cols
        out = np.empty(len(a))
        _keyed_u01_array(self._key_salted(salt), a, b, c, out)
        return out

    def _key_salted(self, salt: int) -> np.uint64:
        return np.uint64((int(self.key) ^ (salt * 0x9E3779B97F4A7C15)) & 0xFFFFFFFFFFFFFFFF)

    def random(self, size: int) -> np.ndarray:
        """Uniforms in [0, 1)."""
        self._check(size)
        return self._u(1)

    def uniform(self, low: float, high: float, size: int) -> np.ndarray:
        """Uniforms in [low, high)."""
        self._check(size)
        return low + (high - low) * self._u(1)

    def normal(self, loc: float, scale: float, size: int) -> np.ndarray:
        """Normals by Box-Muller on two keyed uniforms."""
        self._check(size)
        u1, u2 = 1.0 - self._u(2), self._u(3)  # u1 in (0, 1]
        return loc + scale * np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        """Integers in [low, high)."""
        self._check(size)
        return np.minimum(low + np.floor((high - low) * self._u(4)).astype(np.int64), high - 1)

    def _check(self, size: int) -> None:
        if size != len(self._cols[0]):
            raise ValueError(f"keyed draws are per event: {len(self._cols[0])} events, {size} asked")
