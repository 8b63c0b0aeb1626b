"""Generated gRPC/protobuf code for the coordinator (regenerate with scripts/gen_proto.sh)."""
