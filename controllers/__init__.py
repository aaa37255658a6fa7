"""Control laws behind one interface (``Controller``), looked up by the scenario's ``controller.type``, and the
leaders' input profiles (``LeaderProfile``), looked up by ``leader.profile``."""

from core.registry import Registry

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

LEADER_PROFILES = Registry(
    "leader profile",
    {
        "circle": "controllers.profiles:Circle",
        "circle_speed_change": "controllers.profiles:CircleSpeedChange",
        "s_curve": "controllers.profiles:SCurve",
        "sinusoid": "controllers.profiles:Sinusoid",
        "weave": "controllers.profiles:Weave",
        "braking": "controllers.profiles:Braking",
        "constant": "controllers.profiles:Constant",
    },
    group="coopsim.profiles",
    base="controllers.profiles:LeaderProfile",
)

__all__ = ["CONTROLLERS", "LEADER_PROFILES"]
