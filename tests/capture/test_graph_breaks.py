"""Graph breaks that resume: the function runs as several graphs joined by a little eager Python.

Every test compares with eager on fresh random inputs, over several calls, and checks that side
effects (printing, appending to the caller's lists) happen once per call and in eager's order.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn

import minicompiler
from minicompiler.api import GraphBreakError

from .conftest import assert_same

EVENTS: list[str] = []


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def run_both(fn, make_args, calls: int = 3, backend: str = "eager"):
    """Call eager and compiled `fn` on the same fresh inputs; outputs and events must match."""
    compiled = minicompiler.compile(fn, backend=backend)
    for _ in range(calls):
        args = make_args()
        EVENTS.clear()
        expected = fn(*args)
        eager_events = list(EVENTS)
        EVENTS.clear()
        got = compiled(*args)
        assert EVENTS == eager_events
        assert_same(got, expected)
    return compiled


def log_event(text):
    EVENTS.append(text)


def prints_in_the_middle(x):
    y = torch.sin(x) * 2
    log_event("between")
    print("middle")
    return y.cos() + 1


def test_print_splits_the_function_into_two_graphs(capsys) -> None:
    compiled = run_both(prints_in_the_middle, lambda: (torch.randn(8),))
    assert capsys.readouterr().out == "middle\n" * 6  # once per call, eager's three and ours
    report = compiled.reports[0]
    assert report.eager_fallback is None
    assert len(report.graphs) == 3  # before the log call, between it and print, after print
    kinds = [b.kind for b in report.graph_breaks]
    assert kinds == ["side effect", "side effect"]  # appending to a global list, printing
    printed = report.graph_breaks[1]
    assert printed.lineno == line_of(prints_in_the_middle, "print(")
    assert printed.instruction == "CALL" and printed.hint and "print()" in printed.reason
    assert len(compiled.reports) == 1  # later calls reuse every segment


def item_and_branch(x):
    y = x * 2
    if y.sum() > 0:  # data-dependent control flow: both paths run across calls
        y = y + 1
    else:
        y = y - 1
    scale = y.abs().max().item()
    return y / scale, scale > 1


def test_branch_on_a_tensor_and_item_resume() -> None:
    torch.manual_seed(0)
    compiled = run_both(item_and_branch, lambda: (torch.randn(6),), calls=6)
    kinds = {b.kind for r in compiled.reports for b in r.graph_breaks}
    assert kinds == {"data-dependent control flow", "data-dependent value"}


def appends_to_caller_list(x, out):
    out.append(x.sum())
    log_event("appended")
    out.append(x * 3)
    return len(out), x + 1


def test_mutating_the_callers_list_happens_once_and_in_order() -> None:
    compiled = minicompiler.compile(appends_to_caller_list, backend="eager")
    for _ in range(2):
        x = torch.randn(4)
        expected_list, got_list = [], []
        expected = appends_to_caller_list(x, expected_list)
        got = compiled(x, got_list)
        assert_same(got, expected)
        assert_same(got_list, expected_list)


def breaks_in_a_loop(x, layers):
    for i, layer in enumerate(layers):
        x = layer(x)
        log_event(f"layer {i}")  # a break inside the loop: the loop's iterator is on the stack
    return x


def test_a_break_inside_a_loop_resumes_the_loop() -> None:
    layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
    run_both(lambda x: breaks_in_a_loop(x, layers), lambda: (torch.randn(2, 4),))


class PrintingModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        log_event(f"hidden {tuple(h.shape)}")
        return self.fc2(h).softmax(-1)


def test_module_with_a_break_compiles_both_halves_with_cpp() -> None:
    model = PrintingModel()
    compiled = run_both(model, lambda: (torch.randn(3, 8),), backend="cpp")
    assert len(compiled.report.graphs) == 2 and all(not g.fallback for g in compiled.report.graphs)


def test_fullgraph_raises_naming_the_line_and_records_the_break() -> None:
    compiled = minicompiler.compile(prints_in_the_middle, backend="eager", fullgraph=True)
    # the line is the innermost user line: inside log_event, which log_event(...) inlined
    with pytest.raises(GraphBreakError, match=rf":{line_of(log_event, 'EVENTS.append')} .*a side effect"):
        compiled(torch.randn(3))
    assert len(compiled.report.graph_breaks) == 1
    assert "EVENTS.append" in compiled.report.graph_breaks[0].line


def break_inside_try(x):
    try:
        log_event("inside try")
        y = x + 1
    except RuntimeError:
        y = x
    return y * 2


# (views alive at a break resume: test_views_at_breaks.py)
@pytest.mark.parametrize("fn, reason", [(break_inside_try, "EVENTS")])
def test_breaks_that_cannot_resume_run_the_whole_call_eagerly(fn, reason: str) -> None:
    compiled = run_both(fn, lambda: (torch.randn(3),), calls=3)
    assert reason in compiled.report.eager_fallback
    assert len(compiled.reports) == 1  # like Dynamo's skipped frames: no capture again on later calls


def then_breaks_inside_try(x, scale):
    y = torch.sin(x) * scale
    log_event(f"first {y.shape[0]}")  # resumable: the graph so far runs, then this call
    total = 0.0
    for i in range(3):
        total = total + i * scale
    try:
        log_event("inside try")  # not resumable: the code from the first break on runs for real
        z = y.cos() + total
    except RuntimeError:
        z = y
    return z * 2, total


def test_a_later_segment_that_cannot_be_captured_runs_for_real_from_the_break() -> None:
    compiled = run_both(then_breaks_inside_try, lambda: (torch.randn(6), 1.5), calls=3)
    report = compiled.reports[0]
    assert len(compiled.reports) == 1  # later calls go straight to the uncompiled rest
    assert len(report.graphs) == 1 and [b.line for b in report.graph_breaks] == ["EVENTS.append(text)"] * 2
    assert f"line {line_of(then_breaks_inside_try, 'first')} on" in report.eager_fallback, report.eager_fallback
    assert "EVENTS" in report.eager_fallback or "try" in report.eager_fallback


def counter_then_breaks_inside_try(x):
    count = 0
    y = x * 2
    log_event("first")  # `count` is a cell variable, of the inner function made below

    def bump():
        nonlocal count
        count += 1

    try:
        log_event("inside try")
        bump()
    except RuntimeError:
        pass
    bump()
    return y + count


def test_the_rest_run_for_real_shares_cells_with_inner_functions() -> None:
    compiled = run_both(counter_then_breaks_inside_try, lambda: (torch.randn(3),))
    assert "runs uncompiled" in compiled.report.eager_fallback


def generates(x):
    yield x.sin()
    log_event("between yields")
    yield x.cos()


def test_a_generator_function_runs_uncompiled() -> None:
    compiled = minicompiler.compile(generates, backend="eager")
    x = torch.randn(3)
    EVENTS.clear()
    values = compiled(x)
    assert EVENTS == []  # like eager: calling it runs none of the body
    assert_same(list(values), list(generates(x)))
    assert "generator" in compiled.report.eager_fallback


class Logs(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        EVENTS.append(f"log {x.shape[0]}")
        print("inside a child module")  # breaks inside a module the Sequential calls
        return x * 2


def test_a_break_inside_a_sequential_child_resumes_in_the_sequential_and_runs_the_later_layers() -> None:
    model = nn.Sequential(nn.Linear(8, 8), Logs(), nn.ReLU(), nn.Linear(8, 4))
    compiled = run_both(model, lambda: (torch.randn(5, 8),))
    report = compiled.report
    assert len(report.graph_breaks) == 1 and len(report.graphs) == 2
    assert report.graph_breaks[0].lineno == line_of(Logs.forward, "EVENTS.append")  # the first side effect
