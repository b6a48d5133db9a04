from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
import torch

import minicompiler
from minicompiler.capture import CaptureResult, capture
from minicompiler.ir import run_graph, verify


def capture_and_compare(fn: Callable[..., Any], make_args: Callable[[], tuple], calls: int = 2,
                        **tolerances: float) -> CaptureResult:
    """Capture on one set of inputs; then, on fresh random inputs (twice), the guards pass and
    the graph run by the reference interpreter equals eager `fn`."""
    result = capture(fn, make_args(), {})
    verify(result.graph)
    for _ in range(calls):
        args = make_args()
        assert all(guard.check(args, {}) for guard in result.guards), [
            str(g) for g in result.guards if not g.check(args, {})]
        expected = fn(*args)
        got = run_graph(result.graph, *result.fetch_inputs(args, {}))
        assert_same(got, expected, **tolerances)
    return result


def assert_same(got: Any, expected: Any, **tolerances: float) -> None:
    """Tensors close, Python values equal, through nested tuples/lists/dicts."""
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected, **tolerances)
    elif isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert_same(g, e, **tolerances)
    elif dataclasses.is_dataclass(expected):
        assert type(got) is type(expected)
        assert_same(dataclasses.astuple(got), dataclasses.astuple(expected), **tolerances)
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and list(got) == list(expected)
        for key in expected:
            assert_same(got[key], expected[key], **tolerances)
    else:
        assert type(got) is type(expected) and got == expected, (got, expected)


@pytest.fixture
def check() -> Callable[..., CaptureResult]:
    torch.manual_seed(0)
    return capture_and_compare


def compiles_whole(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Compile `fn`, check one graph and no break, and that two calls match eager."""
    compiled = minicompiler.compile(fn, backend="eager")
    for _ in range(2):
        fresh = [torch.randn_like(a) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                 for a in args]
        got, expected = compiled(*fresh, **kwargs), fn(*fresh, **kwargs)
        torch.testing.assert_close(_tensors(got), _tensors(expected))
    explained = minicompiler.explain(fn)(*args, **kwargs)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.to_text()
    assert not explained.eager_fallbacks, explained.eager_fallbacks
    return got


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []
