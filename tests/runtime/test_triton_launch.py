"""FastLauncher on a real GPU: launching compiled kernels directly gives Triton's results, for
aligned and misaligned pointers and for shape-generic kernels. (CI has no GPU: these run on the
lent H100, without TRITON_INTERPRET, or under `-p tests.triton_on_gpu`; benchmarks/device_run.sh runs
them.)"""

import os

import pytest
import torch

from minicompiler.codegen import generate
from minicompiler.fuse import fuse
from minicompiler.ir import Graph, TensorMeta


@pytest.fixture(autouse=True)
def compiled_triton_on_a_gpu() -> None:
    # asked when each test runs, not at collection: the GPU plugin (tests/triton_on_gpu.py) sets
    # TRITON_INTERPRET=1 while it collects and turns it off before the tests run
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a CUDA GPU and compiled (not interpreted) Triton")


def module_for(shape, dynamic=False):
    g = Graph()
    x = g.placeholder("x", TensorMeta(shape, torch.float32, device=torch.device("cuda")))
    y = g.placeholder("y", TensorMeta(shape, torch.float32, device=torch.device("cuda")))
    g.output(g.call("add", g.call("cos", x), g.call("sum", y, (len(shape) - 1,), True)))
    return generate(fuse(g), "triton", dynamic=dynamic)


def test_direct_launches_match_eager_for_aligned_and_misaligned_inputs():
    module = module_for((64, 33))
    storage = torch.randn(64 * 33 + 1, device="cuda")
    for offset in (0, 1, 0, 1, 0):  # offset 1: a pointer 4 bytes past an aligned one
        x = storage[offset : offset + 64 * 33].view(64, 33)
        y = torch.randn(64, 33, device="cuda")
        torch.testing.assert_close(module([x, y]), torch.cos(x) + y.sum(1, keepdim=True))
    [launcher] = [v for k, v in module._call.__globals__.items() if k.startswith("kernel_")]
    assert len(launcher.compiled) == 2  # one compiled variant per alignment, each launched directly


def test_direct_launches_of_a_shape_generic_kernel():
    module = module_for((8, 16), dynamic=True)
    for rows, cols in ((8, 16), (100, 7), (3, 1000)):
        x, y = torch.randn(rows, cols, device="cuda"), torch.randn(rows, cols, device="cuda")
        torch.testing.assert_close(module([x, y]), torch.cos(x) + y.sum(1, keepdim=True))
