"""The spawns and despawns a hosted federate asks for during a call, collected for that call's reply."""

from __future__ import annotations

from core.robots import RobotSpec

from .codec import pb
from .descriptions import encode_robot


class SpawnRequests:
    """Stands in for the scheduler in a hosted federate's SetupContext: the spawns and despawns it asks for are
    collected and travel back with the reply of the call that made them, for the orchestrator to apply. Without
    the client's "spawn_requests" capability they are refused, as before the protocol had them."""

    def __init__(self) -> None:
        self.enabled = False
        self.pending: list[pb.RobotRequest] = []

    def _check(self, what: str) -> None:
        if not self.enabled:
            raise RuntimeError(f"this orchestrator does not take {what} from a remote federate; declare them in "
                               "the scenario")

    def schedule_spawn(self, spec: RobotSpec, at_ns: int) -> None:
        """Collect a spawn of ``spec`` at ``at_ns``."""
        self._check("spawn requests")
        request = pb.RobotRequest()
        encode_robot(spec, request.spawn.robot, "spawn request")
        request.spawn.at_ns = int(at_ns)
        self.pending.append(request)

    def schedule_despawn(self, robot_id: int, at_ns: int) -> None:
        """Collect a despawn of ``robot_id`` at ``at_ns``."""
        self._check("despawn requests")
        request = pb.RobotRequest()
        request.despawn.robot_id, request.despawn.at_ns = int(robot_id), int(at_ns)
        self.pending.append(request)

