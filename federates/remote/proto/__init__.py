"""The federate protocol: ``coopsim_federate_v1.proto`` and its generated Python module (regenerate with
``python -m grpc_tools.protoc -I. --python_out=. coopsim_federate_v1.proto`` in this directory)."""
