"""Generated gRPC/protobuf code for the coordinator (regenerate with bench/../scripts)."""
