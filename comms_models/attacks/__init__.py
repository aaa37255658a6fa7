"""Attacks on V2X content: models of what a misbehaving station puts in its messages, looked up by the scenario's
``attacks[].type`` (a built-in name, a ``coopsim.attacks`` entry point or a ``package.module:Class`` path).

A channel model that carries attacks (``attach_attacks``: ITS-G5) hands each station's message content to the run's
``AttackPlan`` after the facilities filled it and before the encoder, so captures hold the forged frames and every
frame carries its ground truth (the attack's label, 0 when honest). Jammers (``jamming``) act on the air instead:
the channel adds their power, and a frame lost to it is ``jammed``."""

from core.registry import Registry

ATTACKS = Registry(
    "attack",
    {
        "constant_position": "comms_models.attacks.position:ConstantPosition",
        "constant_offset": "comms_models.attacks.position:ConstantOffset",
        "random_position": "comms_models.attacks.position:RandomPosition",
        "random_offset": "comms_models.attacks.position:RandomOffset",
        "eventual_stop": "comms_models.attacks.position:EventualStop",
        "constant_speed": "comms_models.attacks.speed:ConstantSpeed",
        "speed_offset": "comms_models.attacks.speed:SpeedOffset",
        "random_speed": "comms_models.attacks.speed:RandomSpeed",
        "data_replay": "comms_models.attacks.replay:DataReplay",
        "delayed_message": "comms_models.attacks.replay:DelayedMessage",
        "dos": "comms_models.attacks.rate:DenialOfService",
        "ghost": "comms_models.attacks.rate:GhostVehicle",
        "desired_accel_constant": "comms_models.attacks.platooning:ConstantDesiredAccel",
        "desired_accel_sinusoid": "comms_models.attacks.platooning:SinusoidalDesiredAccel",
        "forged_leader": "comms_models.attacks.platooning:ForgedLeader",
        "forged_maneuver": "comms_models.attacks.platooning:ForgedManeuver",
        "jamming_constant": "comms_models.attacks.jamming:ConstantJamming",
        "jamming_periodic": "comms_models.attacks.jamming:PeriodicJamming",
        "jamming_reactive": "comms_models.attacks.jamming:ReactiveJamming",
    },
    group="coopsim.attacks",
    base="comms_models.attacks.base:Attack",
)

__all__ = ["ATTACKS"]
