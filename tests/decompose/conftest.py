"""Shared by the lowering tests: what "lowered" means, checked on a compiled function's report."""

from __future__ import annotations

from typing import Any


def assert_generated(compiled: Any) -> None:
    """Every step ran in kernels minicompiler wrote: no opaque torch call left in the graphs."""
    kinds = {k.kind for g in compiled.report.graphs for k in g.kernels}
    assert kinds and "extern" not in kinds, kinds


def assert_same_as_eager(compiled: Any, fn: Any, args: list[Any]) -> None:
    """compiled(*args) equals fn(*args), each output of the same dtype, all in generated kernels."""
    import torch

    expected, actual = fn(*args), compiled(*args)
    torch.testing.assert_close(actual, expected)
    for e, a in zip(*(r if isinstance(r, tuple) else (r,) for r in (expected, actual)), strict=True):
        assert e.dtype == a.dtype
    assert_generated(compiled)


def compiled_gradients_match(fn: Any, args: list[Any]) -> Any:
    """fn compiled for C++; its gradients with respect to the floating arguments (float64, made to
    require grad here), of a random weighting of its output, equal eager's. Returns the compiled fn."""
    import torch

    import minicompiler

    floats = [a.requires_grad_() for a in args if a.is_floating_point()]
    compiled = minicompiler.compile(lambda *a: fn(*a), backend="cpp")
    weights = torch.randn(fn(*args).shape, dtype=torch.float64)
    expected = torch.autograd.grad((fn(*args) * weights).sum(), floats)
    actual = torch.autograd.grad((compiled(*args) * weights).sum(), floats)
    torch.testing.assert_close(actual, expected)
    return compiled

