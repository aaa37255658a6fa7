"""Control laws behind one interface (``Controller``), looked up by the scenario's ``controller.type``."""

from orchestrator.registry import Registry

CONTROLLERS = Registry(
    "controller",
    {
        "ela_cacc": "controllers.ela_cacc:ElaCacc",
    },
)

__all__ = ["CONTROLLERS"]
