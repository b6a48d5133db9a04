"""A GPU graph's wrapper makes its buffers with torch's cheaper call (runtime/allocation.py), on
the current GPU, which is the graph's while the wrapper runs. The wrapper's text is checked here
on any machine (Triton's interpreter lets a graph of CUDA tensors be generated without a GPU);
its results on a GPU, on the lent H100."""

import os

import pytest
import torch

from minicompiler.codegen import generate
from minicompiler.fuse import fuse
from minicompiler.ir import Graph, TensorMeta


def module_for(device: torch.device, shape: tuple[int, int] = (8, 16)):
    g = Graph()
    x = g.placeholder("x", TensorMeta(shape, torch.float32, device=device))
    g.output(g.call("sum", g.call("cos", x), (1,), True))
    return generate(fuse(g), "triton")


@pytest.mark.parametrize("device", [torch.device("cuda", 0), torch.device("cuda")])
def test_a_gpu_graph_makes_its_buffers_on_the_current_gpu_and_guards_it(device, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # generated (not run) here, on any machine
    module = module_for(device)
    assert "empty_strided_cuda((8, 1), (1, 1), torch.float32)" in module.wrapper_source
    assert "torch.empty_strided" not in module.wrapper_source
    assert module.cuda_device == device  # __call__ makes it current while the wrapper runs


def test_a_cpu_graph_names_its_device():
    g = Graph()
    x = g.placeholder("x", TensorMeta((8, 16), torch.float32, device=torch.device("cpu")))
    g.output(g.call("cos", x))
    module = generate(fuse(g), "cpp")
    assert "device='cpu'" in module.wrapper_source and module.cuda_device is None


def test_the_wrapper_runs_on_the_graphs_gpu():
    # asked when the test runs, not at collection (the GPU plugin turns the interpreter off then)
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a CUDA GPU and compiled (not interpreted) Triton")
    last = torch.cuda.device_count() - 1
    # sizes of its own: a kernels module of the same text was loaded above under the interpreter
    module = module_for(torch.device("cuda", last), (8, 24))
    x = torch.randn(8, 24, device=f"cuda:{last}")
    with torch.cuda.device(0):  # another GPU current, where there are two
        out = module([x])
        assert torch.cuda.current_device() == 0
    assert out.device == x.device
    torch.testing.assert_close(out, x.cos().sum(1, keepdim=True))
