"""What the checks of a platooning message against the platoon roles take (``checks.leader_claim``,
``leader_moved``, ``maneuver_entitlement``, run by ``kernels.platoon_roles``): each receiver's role comes with
``own`` (``ROLE_COLUMNS``: what its platoon management says, NaN unknown); what a message claims comes with the
deliveries (``platoon_id``, ``platoon_index``, ``maneuver``, ``maneuver_peer``, and the frame's GeoNetworking
position ``gn_x``, ``gn_y``)."""

from __future__ import annotations

ROLE_COLUMNS = ("predecessor", "leader", "platoon_id", "platoon_index")
"""The receiver's platoon role, columns of ``own`` (float64, NaN: unknown)."""
MAX_TRACK_AGE_S = 3.0  # [s] a leader's last CAM older than this places it nowhere (no verdict)

