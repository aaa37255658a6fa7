"""Control laws behind one interface (``Controller``), looked up by the scenario's ``controller.type``."""

from orchestrator.core.registry import Registry

CONTROLLERS = Registry(
    "controller",
    {
        "ela_cacc": "controllers.ela_cacc:ElaCacc",
        "cruise": "controllers.cruise:Cruise",
        "acc": "controllers.acc:Acc",
        "path_cacc": "controllers.path_cacc:PathCacc",
        "ploeg_cacc": "controllers.ploeg_cacc:PloegCacc",
        "cacc_fallback": "controllers.fallback:CaccWithFallback",
    },
    group="coopsim.controllers",
    base="controllers.base:Controller",
)

__all__ = ["CONTROLLERS"]
