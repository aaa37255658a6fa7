"""Recording: trace writers (vehicles, ports), the run directory's files written whole or not at all, and reading
a recorded run back."""
