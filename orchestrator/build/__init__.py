"""World building: a validated scenario becomes federates, robots and plans (start positions, maneuver plans,
the memory budget). It reads the scenario layer and never the other way round."""
