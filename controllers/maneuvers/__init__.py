"""Platoon maneuvers (join at the tail or in the middle, leave, split, merge): every vehicle's state machine, driven
by the platooning messages it receives (``machine``), lanes as offsets from a path with smooth lane changes
(``lanes``), and the slot-tracking law of a vehicle moving to its place (``slot``)."""
