"""An FMU model for the tests, built with pythonfmu at test time: integrates a speed into a distance and
scales it by a tunable gain."""

from pythonfmu import Fmi2Causality, Fmi2Slave, Real


class Odometer(Fmi2Slave):
    """Integrates a speed into a distance; also outputs the speed scaled by a gain."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.speed = 0.0
        self.gain = 2.0
        self.distance = 0.0
        self.scaled = 0.0
        self.register_variable(Real("speed", causality=Fmi2Causality.input))
        self.register_variable(Real("gain", causality=Fmi2Causality.parameter, variability="tunable"))
        self.register_variable(Real("distance", causality=Fmi2Causality.output))
        self.register_variable(Real("scaled", causality=Fmi2Causality.output))

    def do_step(self, current_time, step_size):
        self.distance += self.speed * step_size
        self.scaled = self.gain * self.speed
        return True
