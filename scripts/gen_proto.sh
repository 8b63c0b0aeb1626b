#!/usr/bin/env bash
# Regenerates the coordinator's protobuf/gRPC modules (commit the output).
set -euo pipefail
cd "$(dirname "$0")/.."
out=server/txn/proto
python3 -m grpc_tools.protoc -I "$out" --python_out="$out" --grpc_python_out="$out" \
  "$out/coordinator.proto"
# protoc writes a top-level import; the package is installed as percolator.server.txn.proto.
sed -i 's/^import coordinator_pb2 as /from percolator.server.txn.proto import coordinator_pb2 as /' \
  "$out/coordinator_pb2_grpc.py"
