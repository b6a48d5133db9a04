"""Differential testing for codegen: compile a graph with a backend, run it on fresh random
inputs, and compare with the reference interpreter (`run_graph`).

Triton kernels run on CPU tensors through Triton's interpreter (CI has no GPU); the variable
must be set before triton is imported. Where there is a GPU it is left as the caller set it: set
here, it held for every test of the session, and the GPU tests collected beside these (CUDA graphs)
ran their kernels in the interpreter and failed. (`-p tests.triton_on_gpu` runs these on the GPU.)
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

from minicompiler.codegen import CompiledModule, generate  # noqa: E402
from minicompiler.fuse import fuse  # noqa: E402
from minicompiler.ir import Graph, TensorMeta, flatten, run_graph, verify  # noqa: E402

TOLERANCE = {
    torch.float32: 1e-5, torch.float64: 1e-9, torch.float16: 1e-2, torch.bfloat16: 2e-2,
}


def pytest_configure(config):
    # the interpreter computes masked-off lanes too (log(0), 0/0): numpy warns, harmlessly
    config.addinivalue_line("filterwarnings", "ignore::RuntimeWarning:triton.runtime.interpreter")


@pytest.fixture(scope="session", autouse=True)
def kernel_cache(tmp_path_factory):
    saved = os.environ.get("MINICOMPILER_CACHE_DIR")
    os.environ["MINICOMPILER_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernel_cache"))
    yield
    if saved is None:
        del os.environ["MINICOMPILER_CACHE_DIR"]
    else:
        os.environ["MINICOMPILER_CACHE_DIR"] = saved


@pytest.fixture(params=["cpp", "triton"])
def backend(request):
    return request.param


def build(fn, *examples: torch.Tensor) -> Graph:
    """A graph with one placeholder per example tensor (same layout), output = fn(g, *inputs)."""
    g = Graph()
    inputs = [g.placeholder(f"x{i}", TensorMeta.of(t)) for i, t in enumerate(examples)]
    g.output(fn(g, *inputs))
    return g


def compare(graph: Graph, inputs: list, backend: str, tolerance: float | None = None,
            dynamic: bool = False) -> CompiledModule:
    """Generate `graph` with `backend`, run it on `inputs`; assert it matches run_graph."""
    verify(graph, primitive_only=True)
    module = generate(fuse(graph), backend, dynamic=dynamic)
    got, expected = module(list(inputs)), run_graph(graph, *inputs)
    got_leaves, expected_leaves = list(flatten(got)), list(flatten(expected))
    assert len(got_leaves) == len(expected_leaves)
    for g, e in zip(got_leaves, expected_leaves, strict=True):
        if not isinstance(e, torch.Tensor):
            assert g == e
            continue
        assert (g.shape, g.dtype, g.device) == (e.shape, e.dtype, e.device)
        tol = tolerance if tolerance is not None else TOLERANCE.get(e.dtype, 0)
        torch.testing.assert_close(g, e, rtol=tol, atol=tol, equal_nan=True)
    return module


@pytest.fixture
def check():
    """check(fn, *inputs, backend=..., tolerance=None, dynamic=False): build, compile, compare;
    returns the module."""

    def run(fn, *inputs, backend, tolerance=None, dynamic=False):
        return compare(build(fn, *inputs), list(inputs), backend, tolerance, dynamic)

    return run
