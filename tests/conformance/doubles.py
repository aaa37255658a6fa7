"""In-process doubles of the outside services some federate kinds bridge to, so that the conformance suite puts
those kinds through the same contract checks as the others without a service. The bridges' own tests keep using
the real services (a HELICS broker, an FMU hosted by fmpy in a run)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import types
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


# -- HELICS: a federation of one, whose peer publishes a fixed vector on every subscribed key ---------------------
class _Handle:
    def __init__(self, key: str, units: str) -> None:
        self.key, self.units, self.value = key, units, [1.0, 2.0]


def fake_helics() -> types.ModuleType:
    """The calls ``HelicsBridge`` makes, answered in process: time is granted as asked, every subscription is
    updated at each grant with ``[1.0, 2.0]`` published in metres."""
    h = types.ModuleType("helics")
    h.HelicsException = RuntimeError  # type: ignore[attr-defined]
    h.helics_property_time_period = 0  # type: ignore[attr-defined]
    h.helics_flag_uninterruptible = 0  # type: ignore[attr-defined]
    published: dict[str, list[float]] = {}

    def noop(*_: Any) -> None:
        return None

    for call in ("helicsFederateInfoSetCoreTypeFromString", "helicsFederateInfoSetCoreInitString",
                 "helicsFederateInfoSetTimeProperty", "helicsFederateInfoSetFlagOption",
                 "helicsFederateEnterExecutingModeAsync", "helicsFederateEnterExecutingModeComplete",
                 "helicsFederateDisconnect", "helicsFederateFree"):
        setattr(h, call, noop)
    h.helicsCreateFederateInfo = lambda: object()  # type: ignore[attr-defined]
    h.helicsCreateValueFederate = lambda name, info: object()  # type: ignore[attr-defined]
    h.helicsFederateIsAsyncOperationCompleted = lambda fed: True  # type: ignore[attr-defined]
    h.helicsFederateRegisterGlobalTypePublication = (  # type: ignore[attr-defined]
        lambda fed, key, kind, units: _Handle(key, units))
    h.helicsFederateRegisterSubscription = lambda fed, key, units: _Handle(key, "m")  # type: ignore[attr-defined]
    h.helicsInputGetInjectionUnits = lambda sub: sub.units  # type: ignore[attr-defined]
    h.helicsPublicationPublishVector = lambda pub, values: published.__setitem__(pub.key, values)  # type: ignore[attr-defined]
    h.helicsFederateRequestTime = lambda fed, t: t  # type: ignore[attr-defined]
    h.helicsInputIsUpdated = lambda sub: True  # type: ignore[attr-defined]
    h.helicsInputGetVector = lambda sub: list(sub.value)  # type: ignore[attr-defined]
    h.published = published  # type: ignore[attr-defined]
    return h


@contextlib.contextmanager
def _helics_double(module: types.ModuleType) -> Iterator[None]:
    """``import helics`` answers with the double for the length of one call, and with the real package after."""
    saved = sys.modules.get("helics")
    sys.modules["helics"] = module
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop("helics", None)
        else:
            sys.modules["helics"] = saved


def helics_bridge(name: str) -> Any:
    """A HELICS bridge whose federation is the double: it publishes the state's speeds and reads one port."""
    from federates.helics.federate import HelicsBridge

    module = fake_helics()

    class DoubledHelicsBridge(HelicsBridge):
        def setup(self, ctx: Any) -> Any:
            with _helics_double(module):
                return super().setup(ctx)

        def step(self, t_ns: int, inputs: Any) -> Any:
            with _helics_double(module):
                return super().step(t_ns, inputs)

        def finalize(self) -> None:
            with _helics_double(module):
                super().finalize()

    return DoubledHelicsBridge(name, broker="in-process", publish={"state": ["id", "v"]},
                               subscribe={"probe": {"v2": "peer/probe/v2"}})


# -- FMU: the tests' odometer model, built once per session with pythonfmu ---------------------------------------
@cache
def odometer_fmu() -> Path:
    """The odometer FMU of ``tests/orchestrator/fmu`` (built with pythonfmu into a temporary folder)."""
    out = Path(tempfile.mkdtemp(prefix="coopsim-conformance-fmu-"))
    build = subprocess.run([str(Path(sys.executable).parent / "pythonfmu"), "build", "-f",
                            str(REPO / "tests" / "orchestrator" / "fmu" / "Odometer.py"), "-d", str(out)],
                           capture_output=True, text=True, timeout=300)
    if build.returncode != 0:
        raise RuntimeError(f"pythonfmu could not build the odometer FMU: {build.stderr}")
    return out / "Odometer.fmu"


def fmu_federate(name: str) -> Any:
    """An FMU federate stepping the odometer for every robot."""
    from federates.fmu.federate import FmuFederate

    return FmuFederate(name, str(odometer_fmu()), period_s=0.1, inputs={"speed": "state.v"},
                       outputs={"odometer": {"distance": "distance", "scaled": "scaled"}})
