"""The trace the bytecode stepper replays: one step per instruction run, with the symbolic stack,
locals, guards and the graph so far."""

from __future__ import annotations

import torch

import minicompiler
from minicompiler.capture.records import MAX_TRACE_STEPS


def test_cos_cos_trace_grows_the_graph_at_each_call() -> None:
    compiled = minicompiler.compile(lambda x: torch.cos(torch.cos(x)), backend="eager")
    compiled(torch.randn(8))
    trace = compiled.report.trace
    assert [step.opname for step in trace][-1] == "RETURN_VALUE"
    calls = [step for step in trace if step.opname == "CALL"]
    assert [len(step.graph_nodes) for step in calls] == [2, 3]  # x, then cos, then cos of cos
    assert calls[-1].graph_nodes[-1].startswith("cos_0 = ops.cos(cos)")
    assert calls[0].stack[-1] == "cos: float32[8]" and all(s.status == "captured" for s in calls)
    assert trace[0].locals == {"x": "x: float32[8]"}
    assert all(step.guards == ["x: float32[8] contiguous cpu requires_grad=False"] for step in trace)
    assert not compiled.report.trace_truncated


def test_trace_follows_inlined_calls_and_graph_breaks() -> None:
    def helper(t):
        return t.sin()

    def fn(x):
        y = helper(x)
        print("between graphs")
        return y + 1

    compiled = minicompiler.compile(fn, backend="eager")
    compiled(torch.randn(3))
    trace = compiled.report.trace
    assert {step.function.rsplit(".", 1)[-1] for step in trace} == {"fn", "helper"}
    breaks = [step for step in trace if step.status == "break"]
    assert len(breaks) == 1 and breaks[0].opname == "CALL"
    assert trace[-1].opname == "RETURN_VALUE"  # the segment after the break is traced too


def test_long_traces_are_capped() -> None:
    def fn(x):
        for _ in range(1000):
            x = x + 1
        return x

    compiled = minicompiler.compile(fn, backend="eager")
    compiled(torch.randn(2))
    assert len(compiled.report.trace) == MAX_TRACE_STEPS and compiled.report.trace_truncated


def test_eager_fallback_keeps_bytecode_and_trace() -> None:
    def fn(x):
        try:
            return x.tolist()  # a break inside a try body cannot resume
        except ValueError:
            return None

    compiled = minicompiler.compile(fn)
    assert compiled(torch.ones(2)) == [1.0, 1.0]
    report = compiled.report
    assert report.eager_fallback
    assert any(info.status == "break" for info in report.bytecode)
    assert report.trace[-1].status == "break"
