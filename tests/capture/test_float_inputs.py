"""Floats that `.item()` returned before a graph break: after the first change of value, the
segment that uses them reads them as graph inputs instead of compiling again for every value.
Every call compares with eager on fresh inputs; the report count says when capture ran."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

import minicompiler

from .conftest import assert_same

EVENTS: list[str] = []


def run_both(fn, make_args, calls: int = 5, backend: str = "cpp", **tolerance: float):
    compiled = minicompiler.compile(fn, backend=backend)
    for _ in range(calls):
        args = make_args()
        EVENTS.clear()
        expected = fn(*args)
        expected_events = list(EVENTS)
        EVENTS.clear()
        assert_same(compiled(*args), expected, **tolerance)
        assert EVENTS == expected_events
    return compiled


def normalise(x):
    # .item() breaks the graph: s is a Python float in the next segment; arithmetic on it stays there
    s = x.abs().max().item()
    t = s * 2 + 1 - s
    return torch.cos(x) / s + t, -s


TRITON = pytest.param("triton", marks=pytest.mark.skipif(
    importlib.util.find_spec("triton") is None or not (torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET")),
    reason="Triton needs a GPU or TRITON_INTERPRET=1 (the capture runs on 3.12 and 3.13 have neither)"))


@pytest.mark.parametrize("backend", ["cpp", TRITON])
def test_a_float_from_item_becomes_an_input_after_its_first_change(backend: str) -> None:
    compiled = run_both(normalise, lambda: (torch.randn(100),), backend=backend)
    assert len(compiled.reports) == 2  # the first call, then the recompile that learned the float
    second = compiled.reports[1]
    assert "guard failed" in second.recompile_reason
    assert second.dynamic == ["the float stack0 (from `s = x.abs().max().item()`) is a graph input, not a constant"]
    assert "type(args[0]) is float" in second.graphs[-1].guards


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.float16])
def test_the_float_meets_tensors_as_a_python_float_would(dtype: torch.dtype) -> None:
    def scale(x):
        s = x.double().abs().mean().item()  # float64: the same s as eager's to the last bit or so
        return x * s, x < s, s - x

    make = (lambda: ((torch.randn(50) * 10).to(dtype),))
    tolerance = {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.float16 else {}  # a half ulp apart at most
    compiled = run_both(scale, make, **tolerance)
    assert len(compiled.reports) == 2
    got = compiled(*make())
    assert [t.dtype for t in got] == [t.dtype for t in scale(*make())]


def branches_on_the_float(x):
    s = x.sum().item()
    if s > 0:  # only the outcome is guarded: one graph per side, not per value
        return x * s
    return x - s


def test_comparing_the_float_guards_the_outcome_not_the_value() -> None:
    torch.manual_seed(0)
    compiled = run_both(branches_on_the_float, lambda: (torch.randn(20),), calls=12)
    assert len(compiled.reports) <= 3
    guards = [g for r in compiled.reports[1:] for graph in r.graphs for g in graph.guards]
    assert any(g.startswith("(args[0] > 0) is") for g in guards)


def needs_the_number(x):
    s = x.abs().max().item()
    return x.clamp(max=s / 2)  # a torch argument that must be a number: specialized (guarded)


def test_a_float_that_must_be_a_number_is_specialized_and_stays_correct() -> None:
    compiled = run_both(needs_the_number, lambda: (torch.randn(10),), calls=4)
    assert len(compiled.reports) == 4  # every new value captures again, as a plain float would


def float_alive_at_a_later_break(x):
    s = x.abs().max().item()
    y = x * s
    EVENTS.append(f"{y.shape[0]}")  # a second break, with s alive in the frame
    return y + s


def test_a_float_input_alive_at_a_later_break_is_passed_on() -> None:
    compiled = run_both(float_alive_at_a_later_break, lambda: (torch.randn(10),), calls=5)
    assert len(compiled.reports) <= 3
