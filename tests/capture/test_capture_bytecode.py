"""Provenance (each node knows its source line) and the bytecode listing."""

from __future__ import annotations

import inspect

import torch

from minicompiler.capture import capture


def two_lines(x):
    a = torch.cos(x)
    b = torch.sin(a)
    return b


def with_branch(x, flag=False):
    if flag:
        x = x * 2
    return x + 1


def inner(t):
    return t.exp()


def outer(x):
    return inner(x) + 1


def first_line(fn) -> int:
    return inspect.getsourcelines(fn)[1]


def test_each_node_carries_its_line() -> None:
    result = capture(two_lines, (torch.randn(3),), {})
    cos, sin = result.graph.compute_nodes()
    start = first_line(two_lines)
    assert (cos.source.lineno, cos.source.line) == (start + 1, "a = torch.cos(x)")
    assert (sin.source.lineno, sin.source.function) == (start + 2, "two_lines")
    assert cos.source.filename == __file__ and cos.source.offset >= 0


def test_placeholders_point_at_the_def_line() -> None:
    result = capture(two_lines, (torch.randn(3),), {})
    (x,) = result.graph.inputs
    assert (x.source.lineno, x.source.line) == (first_line(two_lines), "def two_lines(x):")


def test_inlined_nodes_carry_the_callee_line() -> None:
    result = capture(outer, (torch.randn(3),), {})
    exp, add = result.graph.compute_nodes()
    assert (exp.source.function, exp.source.lineno) == ("inner", first_line(inner) + 1)
    assert (add.source.function, add.source.lineno) == ("outer", first_line(outer) + 1)
    assert {r.function for r in result.bytecode} == {"outer", "inner"}


def test_statuses() -> None:
    result = capture(with_branch, (torch.randn(3),), {})
    by_line: dict[int, set[str]] = {}
    for record in result.bytecode:
        by_line.setdefault(record.lineno, set()).add(record.status)
    start = first_line(with_branch)
    assert by_line[start + 1] == {"constant"}  # `if flag:` is decided at capture time
    assert by_line[start + 2] == {"not reached"}
    assert "captured" in by_line[start + 3]
    assert all(r.function == "with_branch" for r in result.bytecode)


def test_every_instruction_is_listed_once() -> None:
    import dis

    result = capture(with_branch, (torch.randn(3),), {})
    assert [r.offset for r in result.bytecode] == [i.offset for i in dis.get_instructions(with_branch)]


def test_printed_graph_is_runnable_python() -> None:
    from minicompiler.ir import compile_printed

    x = torch.randn(3)
    result = capture(two_lines, (x,), {})
    text = str(result.graph)
    assert "a = torch.cos(x)" in text  # the source line is in the printout
    torch.testing.assert_close(compile_printed(result.graph)(x), two_lines(x))
