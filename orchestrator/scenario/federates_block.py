"""The ``federates:`` entries of a scenario: extra federates in process or hosted elsewhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, field_validator, model_validator

from core.params import FileName, Strict
from core.scenario_dir import current_scenario_dir


class ExtraFederate(Strict):
    """An additional federate (external simulator): a registered type or a ``package.module:Class`` path."""

    name: FileName
    type: str
    params: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the federate")
    remote: str | None = Field(
        None, description="host:port of a 'coopsim host' that runs this federate over gRPC, or framed://host:port "
        "over framed TCP (type and params are resolved there)"
    )
    connect_timeout_s: float = Field(10.0, gt=0, description="how long to wait for the remote host at setup [s]")
    call_timeout_s: float = Field(60.0, gt=0, description="how long to wait for each answer of a remote host [s]")
    _scenario_dir: Path | None = PrivateAttr(default_factory=current_scenario_dir)  # where the file was read

    @property
    def scenario_dir(self) -> Path | None:
        """The directory of the scenario file that declared this federate (None: no file; then the working
        directory), which its relative file names are resolved against."""
        return self._scenario_dir

    @field_validator("remote")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is not None:
            from federates.remote.framing import split_address

            try:  # host:port (gRPC) or framed://host:port; another scheme is refused, naming the ones there are
                split_address(value)
            except ValueError as exc:
                raise ValueError(f"remote {exc}") from None
        return value

    @field_validator("type")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        from federates import FEDERATE_KINDS

        return FEDERATE_KINDS.check(value)  # imported by _constructible (here) or by the host (remote)

    @model_validator(mode="after")
    def _constructible(self) -> ExtraFederate:
        """The class imports and takes (name, **params): checked before anything runs (by the host, for a remote
        federate, whose code need not exist here)."""
        import inspect

        if self.remote is not None:
            return self

        from core.registry import UnknownNameError
        from federates import FEDERATE_KINDS

        try:
            federate_cls = FEDERATE_KINDS.get(self.type)
        except (UnknownNameError, ImportError) as exc:
            raise ValueError(str(exc)) from None
        if getattr(federate_cls, "Params", None) is not None:
            return self  # a Params model checks the parameters, at their lines (loader.check_plugins)
        try:
            inspect.signature(federate_cls).bind(self.name, **self.params)
        except TypeError as exc:
            accepted = [p for p in inspect.signature(federate_cls).parameters if p != "name"]
            raise ValueError(f"params of '{self.type}': {exc}; it takes: {', '.join(accepted) or 'nothing'}") from None
        return self
