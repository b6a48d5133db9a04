"""Benchmarks: eager vs minicompiler vs torch.compile on the seeds' workloads."""
