"""SUMO as a federate (``type: sumo``): its vehicles become coopsim robots, coopsim's robots are mirrored into it.
See ``federate`` and docs/sumo.md."""
