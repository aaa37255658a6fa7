"""Channel models behind one interface (``CommsModel``), looked up by the scenario's ``channel.type``."""

from core.registry import Registry

from .base import CommsModel, Deliveries, Interest

COMMS_MODELS = Registry(
    "channel model",
    {
        "ideal": "comms_models.ideal:IdealChannel",
        "itsg5": "comms_models.itsg5.model:ItsG5Channel",
        "cv2x": "comms_models.cv2x.model:Cv2xChannel",
    },
    group="coopsim.channels",
    base="comms_models.base:CommsModel",
)

__all__ = ["COMMS_MODELS", "CommsModel", "Deliveries", "Interest"]
