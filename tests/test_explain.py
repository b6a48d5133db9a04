"""minicompiler.explain: graphs, graph breaks (with their lines), ops and guards of one call."""

from __future__ import annotations

import inspect

import torch
from torch import nn

import minicompiler
from minicompiler.explain import ExplainOutput

CALLS: list[torch.Tensor] = []
PRINT_CALL = "print('between"  # finds the print call's line (not the def's: `with_print(`)


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def with_print(x):
    y = torch.cos(x)
    print('between graphs')
    return torch.cos(y) + x.sin() * 2


def clean(x):
    return torch.cos(torch.cos(x))


def test_a_print_makes_two_graphs_and_one_break_at_its_line(capsys):
    out = minicompiler.explain(with_print)(torch.randn(8))
    assert isinstance(out, ExplainOutput)
    assert (out.graph_count, out.graph_break_count) == (2, 1)
    brk = out.breaks[0]
    assert brk.lineno == line_of(with_print, PRINT_CALL)
    assert brk.filename == __file__ and "print" in brk.line
    assert "print()" in brk.reason
    assert out.ops_per_graph[0] == ["cos"]
    assert {"cos", "sin", "mul", "add"} <= set(out.ops_per_graph[1])
    assert out.op_count == sum(len(ops) for ops in out.ops_per_graph)
    assert all(guards for guards in out.guards_per_graph)  # every graph is guarded on its inputs
    assert out.compile_seconds > 0 and len(out.reports) == 1
    assert capsys.readouterr().out.count("between graphs") == 1  # the function ran once


def test_a_clean_function_is_one_graph_without_breaks():
    out = minicompiler.explain(clean)(torch.randn(4, 4))
    assert (out.graph_count, out.graph_break_count) == (1, 0)
    assert out.breaks == [] and out.ops_per_graph == [["cos", "cos"]]
    assert any("x" in guard for guard in out.guards_per_graph[0])


def test_repr_reads_like_dynamo_explain_and_names_the_reason():
    out = minicompiler.explain(with_print)(torch.randn(3))
    text = repr(out)
    assert str(out) == text
    assert "Graph Count: 2" in text and "Graph Break Count: 1" in text
    assert out.breaks[0].reason in text
    assert f"{__file__}:{line_of(with_print, PRINT_CALL)}" in text
    for guard in out.guards_per_graph[1]:
        assert guard in text


def test_explain_runs_the_function_once_with_eager_results():
    def records(x, y):
        CALLS.append(torch.sin(x) * y)
        return x

    CALLS.clear()
    x, y = torch.randn(5), torch.randn(5)
    minicompiler.explain(records)(x, y=y)
    assert len(CALLS) == 1
    torch.testing.assert_close(CALLS[0], torch.sin(x) * y)


def test_modules_and_functions_kept_whole_are_named():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
    out = minicompiler.explain(lambda x: torch.argsort(model(x), dim=1))(torch.randn(2, 4))
    assert out.graph_count == 1
    assert out.ops_per_graph[0] == ["linear", "relu", "torch_call(torch.argsort)"]
