"""DDP on the CPU: examples/ddp_train.py launched by torchrun with 2 processes and the gloo backend.
A compiled module wrapped in DistributedDataParallel, and a DDP-wrapped module compiled: after one
step every gradient equals one process's for the same global batch (the script raises otherwise),
and the model ran compiled (not an eager fallback)."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "ddp_train.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="torch without gloo")
def test_compiled_modules_under_ddp_have_one_process_gradients():
    orders = ["eager DDP", "minicompiler, then DDP", "DDP, then minicompiler"]
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
               f"--master_port={free_port()}", str(SCRIPT), "--backend", "gloo", "--device", "cpu", "--small",
               "--steps", "0", "--orders", *orders]
    result = subprocess.run(command, capture_output=True, text=True, timeout=240,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = result.stdout.split("grad check")[-1]
    for model in ("cnn", "transformer"):
        for order in orders:
            assert f"{model:12} {order:28}" in table
