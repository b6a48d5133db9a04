"""iota, an element's coordinate along one dim computed in the kernel (no buffer), and what is
written with it: tril and triu (decompose/rounding.py) through generated kernels only, both
backends (conftest sets TRITON_INTERPRET=1), over shapes, dtypes, diagonals, fused into reductions
and dynamic-shape kernels; gradients vs eager."""

from __future__ import annotations

import pytest
import torch

import minicompiler
from minicompiler.ir import Graph, TensorMeta

SHAPES = [(5, 7), (3, 4, 4), (1, 6), (6, 1), (0, 3), (2, 3, 0)]
PROGRAMS = {
    "tril": torch.tril,
    "triu_1": lambda a: a.triu(1),
    "tril_neg": lambda a: torch.tril(a, -2) + 1,
    "triu_of_transposed": lambda a: torch.triu(a.transpose(-1, -2), -1),
}


def _kinds(compiled) -> set[str]:
    return {k.kind for g in compiled.report.graphs for k in g.kernels}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_triangles_match_eager(backend: str, name: str, dtype: torch.dtype) -> None:
    fn = PROGRAMS[name]
    compiled = minicompiler.compile(fn, backend=backend)
    for shape in SHAPES:
        x = (torch.randn(shape) * 3).to(dtype)
        torch.testing.assert_close(compiled(x), fn(x))
    assert "extern" not in _kinds(compiled)


@pytest.mark.parametrize("dynamic", [False, True])
def test_triangles_inside_reductions(backend: str, dynamic: bool) -> None:
    def fn(a):  # a causal-mask softmax, and a row max of the strict lower triangle
        return torch.softmax(torch.tril(a) - torch.triu(a, 1) * 2, -1).sum(0) + torch.tril(a, -1).amax(1).sum()

    compiled = minicompiler.compile(fn, backend=backend, dynamic=dynamic)
    for n in (5, 7):
        x = torch.randn(n, n + 1)
        torch.testing.assert_close(compiled(x), fn(x))
    assert _kinds(compiled) == {"reduction"}


def test_triangle_gradient(backend: str) -> None:
    weight = torch.linspace(0, 1, 5, dtype=torch.float64)

    def fn(a):
        return (torch.tril(a, 1) * weight - torch.triu(a, 2)).sum()

    x = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    expected = torch.autograd.grad(fn(x), x)[0]
    actual = torch.autograd.grad(minicompiler.compile(fn, backend=backend)(x), x)[0]
    torch.testing.assert_close(actual, expected)


def test_an_iota_output_is_a_kernel_of_its_own(check, backend: str) -> None:
    """An iota the graph returns needs memory: it is computed by a kernel, not inlined."""
    module = check(lambda g, x: (g.call("iota", (1, 4, 1), 1, torch.float32), g.call("add", x, 1)),
                   torch.randn(3), backend=backend)
    assert module is not None


def test_iota_values() -> None:
    g = Graph()
    g.output(g.call("iota", (1, 3), 1, torch.int64))
    assert g.output_nodes()[0].meta == TensorMeta((1, 3), torch.int64)
