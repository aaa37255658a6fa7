"""Many copies of the environment stepped together: today ``gymnasium.vector.SyncVectorEnv`` over copies that share
one built world.

Each copy has a world of its own (its own scheduler and federates, copied from the one pristine world at reset), and
the vector steps them one after the other in this process. What the copies share is everything built before the
first reset: the scenario, the robots' specs and the set-up worlds per seed. So making 256 copies costs one world
build, not 256. Stepping all copies in one world, one scheduler instant carrying every copy's robots (the batched
sweeps of issue 27), is not available yet: a vector of N copies costs N times one copy's step (docs/gym.md).
"""

from __future__ import annotations

from typing import Any

import gymnasium

from .env import PlatoonEnv


def make_vector(num_envs: int = 1, **kwargs: Any) -> gymnasium.vector.SyncVectorEnv:
    """``num_envs`` copies of ``PlatoonEnv(**kwargs)`` in a ``SyncVectorEnv`` (Gymnasium's
    ``make_vec("coopsim/Platoon-v0", num_envs, vectorization_mode="vector_entry_point")`` calls this)."""
    kwargs.pop("render_mode", None)
    first = PlatoonEnv(**kwargs)
    return gymnasium.vector.SyncVectorEnv([lambda: first] + [lambda k=k: first.sibling(k) for k in range(1, num_envs)])
