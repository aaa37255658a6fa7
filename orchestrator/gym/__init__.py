"""coopsim as a Gymnasium environment (the ``gym`` extra: ``pip install coopsim[gym]``).

Importing this package registers ``coopsim/Platoon-v0`` with Gymnasium, so that after ``import orchestrator.gym``
``gymnasium.make("coopsim/Platoon-v0", scenario="scenarios/platoon.yaml")`` builds a ``PlatoonEnv``
(``gymnasium.make("orchestrator.gym:coopsim/Platoon-v0", ...)`` imports it by itself). See docs/gym.md.
"""

from __future__ import annotations

import gymnasium

ENV_ID = "coopsim/Platoon-v0"
"""The environment's id in Gymnasium's registry."""


def register() -> None:
    """Registers ``coopsim/Platoon-v0`` (once; importing this package does it)."""
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="orchestrator.gym.env:PlatoonEnv",
                           vector_entry_point="orchestrator.gym.vector:make_vector")


register()

__all__ = ["ENV_ID", "register"]
