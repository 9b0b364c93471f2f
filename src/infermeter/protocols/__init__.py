"""Wire protocols shared by a client and the emulator: the KServe v2 / Triton streaming gRPC subset (generated code)."""
