from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
import torch

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
