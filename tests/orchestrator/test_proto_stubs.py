"""The committed Python stubs of the federate protocol are what the committed ``.proto`` generates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROTO_DIR = Path(__file__).resolve().parents[2] / "federates" / "remote" / "proto"
PROTO = "coopsim_federate_v1.proto"


def test_the_committed_stubs_are_current(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="needs grpcio-tools (the test extra) to run protoc")
    done = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={tmp_path}",
                           PROTO], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    fresh = (tmp_path / "coopsim_federate_v1_pb2.py").read_bytes()
    committed = (PROTO_DIR / "coopsim_federate_v1_pb2.py").read_bytes()
    assert fresh == committed, ("federates/remote/proto/coopsim_federate_v1_pb2.py is stale: regenerate it with "
                                "cd federates/remote/proto && python -m grpc_tools.protoc -I. --python_out=. "
                                f"{PROTO}")


def test_the_stubs_declare_the_versioned_package_and_service() -> None:
    from federates.remote.proto import coopsim_federate_v1_pb2 as pb

    assert pb.DESCRIPTOR.package == "coopsim.federate.v1"
    service = pb.DESCRIPTOR.services_by_name["FederateHost"]
    method = service.methods_by_name["Session"]
    assert method.client_streaming and method.server_streaming
    assert method.input_type.name == "Request" and method.output_type.name == "Reply"
    calls = [f.name for f in pb.Request.DESCRIPTOR.oneofs_by_name["call"].fields]
    assert calls == ["hello", "setup", "spawn", "despawn", "step", "next_time", "finalize"]
