"""An FMU model for the tests, built with pythonfmu at test time: a cruise "ECU" whose speed reference steps from
``base`` to ``base + step`` at ``step_time`` (an external controller in the loop)."""

from pythonfmu import Fmi2Causality, Fmi2Slave, Real


class CruiseEcu(Fmi2Slave):
    """Outputs a speed reference ``v_ref`` [m/s] and a steering reference ``delta_ref`` (zero) [rad]."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.base = 1.0
        self.step = 0.5
        self.step_time = 1.0
        self.v_ref = 1.0
        self.delta_ref = 0.0
        for name in ("base", "step", "step_time"):
            self.register_variable(Real(name, causality=Fmi2Causality.parameter, variability="tunable"))
        self.register_variable(Real("v_ref", causality=Fmi2Causality.output))
        self.register_variable(Real("delta_ref", causality=Fmi2Causality.output))

    def do_step(self, current_time, step_size):
        ahead = current_time + step_size
        self.v_ref = self.base + (self.step if ahead >= self.step_time - 1e-9 else 0.0)
        return True
