"""A cell as a function: which names are inputs, which are returned, and the cell's line numbers."""

from __future__ import annotations

import linecache
import traceback

import numpy as np
import pytest
import torch

from minicompiler.notebook.cell import cell_function


def namespace() -> dict:
    return {"torch": torch, "x": torch.randn(4), "w": torch.randn(4), "arr": np.ones(3), "n": 2,
            "net": torch.nn.Linear(4, 4), "scale": lambda t: t * 2}


def test_inputs_are_tensors_modules_and_arrays_it_reads() -> None:
    ns = namespace()
    source = "y = scale(net(x)) * n\nz = arr + 1\ny.sum()"
    cell = cell_function(source, ns, "cell_1", "<minicompiler-cell-t1>")
    assert cell.inputs == ["net", "x", "arr"] and cell.assigned == ["y", "z"]
    value, assigned = cell.function(*cell.arguments(ns))
    expected = (ns["net"](ns["x"]) * 2 * 2)
    torch.testing.assert_close(value, expected.sum())
    torch.testing.assert_close(assigned["y"], expected)


def test_a_name_read_and_assigned_is_an_input_and_nested_scopes_assign_nothing() -> None:
    ns = namespace()
    source = "n = n + 1\ndef helper(t):\n    inner = t\n    return inner\nsquares = [i * i for i in range(3)]"
    cell = cell_function(source, ns, "cell_2", "<minicompiler-cell-t2>")
    assert cell.inputs == ["n"] and cell.assigned == ["n", "helper", "squares"]
    value, assigned = cell.function(*cell.arguments(ns))
    assert value is None and assigned["n"] == 3 and assigned["squares"] == [0, 1, 4]


def test_a_trailing_semicolon_hides_the_value() -> None:
    cell = cell_function("x + 1;", namespace(), "cell_3", "<minicompiler-cell-t3>")
    assert cell.function(*cell.arguments(namespace()))[0] is None


def test_tracebacks_point_at_the_cells_own_lines() -> None:
    ns = namespace()
    cell = cell_function("y = x + 1\nz = y @ torch.ones(5)\n", ns, "cell_4", "<minicompiler-cell-t4>")
    with pytest.raises(RuntimeError) as info:
        cell.function(*cell.arguments(ns))
    frame = traceback.extract_tb(info.value.__traceback__)[-1]
    assert (frame.filename, frame.lineno) == ("<minicompiler-cell-t4>", 2)
    assert frame.line == "z = y @ torch.ones(5)"
    assert linecache.getline("<minicompiler-cell-t4>", 1) == "y = x + 1\n"


def test_a_syntax_error_points_at_the_cell() -> None:
    with pytest.raises(SyntaxError) as info:
        cell_function("y = x +\n", namespace(), "cell_5", "<minicompiler-cell-t5>")
    assert info.value.filename == "<minicompiler-cell-t5>" and info.value.lineno == 1
