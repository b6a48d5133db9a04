"""Shape-generic kernels: generate(..., dynamic=True) writes one kernel text for every size."""

import re

import pytest
import torch

from minicompiler.ir import Graph, TensorMeta, flatten, run_graph
from minicompiler.runtime import loader

SIZES = (3, 17, 128)


def pointwise_inputs(n):
    """(N, 64) inputs: contiguous, broadcast along each dim, and transposed (strided)."""
    return [torch.randn(n, 64), torch.randn(64), torch.randn(n, 1), torch.randn(64, n).t()]


def pointwise(g, x, bias, column, transposed):
    scaled = g.call("mul", g.call("sin", x), bias)
    return g.call("add", g.call("where", g.call("gt", x, column), scaled, transposed), g.call("cos", column))


def softmax_and_column_sums(g, x, bias):
    x = g.call("add", x, bias)
    exps = g.call("exp", g.call("sub", x, g.call("amax", x, (1,), True)))
    return g.call("div", exps, g.call("sum", exps, (1,), True)), g.call("sum", x, (0,), False)


def reduction_inputs(n):
    return [torch.randn(n, 64) * 4, torch.randn(64)]


def build(fn, *examples):
    g = Graph()
    g.output(fn(g, *[g.placeholder(f"x{i}", TensorMeta.of(t)) for i, t in enumerate(examples)]))
    return g


def sources(check, fn, make_inputs, backend, dynamic):
    """Kernel sources of fn's graph built at each size; each module checked against run_graph."""
    return [check(fn, *make_inputs(n), backend=backend, dynamic=dynamic).kernel_sources for n in SIZES]


@pytest.mark.parametrize("fn, make_inputs", [(pointwise, pointwise_inputs),
                                             (softmax_and_column_sums, reduction_inputs)])
def test_dynamic_kernels_are_the_same_text_for_every_size(fn, make_inputs, backend, check):
    texts = sources(check, fn, make_inputs, backend, dynamic=True)
    assert texts[0] == texts[1] == texts[2]
    assert not re.search(rf"\b({'|'.join(map(str, SIZES))})\b", "".join(texts[0].values()))  # no size baked in
    static = sources(check, fn, make_inputs, backend, dynamic=False)
    assert static[0] != static[1]  # baked sizes: one text per size


@pytest.mark.parametrize("fn, make_inputs", [(pointwise, pointwise_inputs),
                                             (softmax_and_column_sums, reduction_inputs)])
def test_the_wrapper_reads_sizes_and_strides_from_its_tensors(fn, make_inputs, backend, check):
    module = check(fn, *make_inputs(5), backend=backend, dynamic=True)
    assert "size0, size1 = x0.shape[0], x0.shape[1]" in module.wrapper_source
    inputs = make_inputs(23)  # so the module built at 5 computes at 23 (kernels and allocations)
    for got, expected in zip(flatten(module(inputs)), flatten(run_graph(build(fn, *inputs), *inputs)), strict=True):
        torch.testing.assert_close(got, expected)


def test_a_second_size_reuses_the_compiled_library(monkeypatch, tmp_path, check):
    monkeypatch.setenv("MINICOMPILER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(loader, "_loaded", {})
    builds = []
    compile_cpp = loader._compile_cpp
    monkeypatch.setattr(loader, "_compile_cpp", lambda *args: builds.append(args) or compile_cpp(*args))
    for n in SIZES:
        check(softmax_and_column_sums, *reduction_inputs(n), backend="cpp", dynamic=True)
    assert len(builds) == 1
