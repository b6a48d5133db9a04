"""Resume functions: a function's own bytecode, run for real from the middle, with the frame's
locals, cells and value stack restored (run on 3.11, 3.12 and 3.13 by the capture test runs)."""

from __future__ import annotations

import dis
import sys
import traceback
import types

import pytest

from minicompiler.capture.resume_function import resume_function

NULL = object()


def offset_of_line(fn, line_in_body: int, opname: str | None = None) -> int:
    """The first instruction of `fn`'s line `line_in_body` (1 = the line after `def`)."""
    line = fn.__code__.co_firstlineno + line_in_body
    return next(i.offset for i in dis.get_instructions(fn)
                if i.positions.lineno == line and (opname is None or i.opname == opname))


def loop_then_try(x, n):
    total = 0
    for i in range(n):
        total += i * x
    try:
        y = total + 1
        z = 1 / x
    except ZeroDivisionError:
        y, z = -1, 0
    return y, z


@pytest.mark.parametrize("x, expected", [(2.0, (8.0, 0.5)), (0.0, (-1, 0))])
def test_resuming_inside_a_try_body_keeps_its_handler(x, expected) -> None:
    rest = resume_function(loop_then_try, offset_of_line(loop_then_try, 5), [], {"x": x, "n": 3, "total": 7.0},
                           NULL)
    assert rest() == expected


def test_resuming_a_loop_takes_its_iterator_from_the_stack() -> None:
    at_for = offset_of_line(loop_then_try, 2, "FOR_ITER")
    rest = resume_function(loop_then_try, at_for, [iter([5, 6])], {"x": 1.0, "n": 3, "total": 100.0}, NULL)
    assert rest() == (112.0, 1.0)


def raises(a):
    b = a + 1
    c = b * 2
    raise ValueError(c)


def test_tracebacks_name_the_users_lines() -> None:
    rest = resume_function(raises, offset_of_line(raises, 2), [], {"a": 1, "b": 5}, NULL)
    with pytest.raises(ValueError) as info:
        rest()
    assert traceback.extract_tb(info.value.__traceback__)[-1].lineno == raises.__code__.co_firstlineno + 3


def counter(a):
    count = a

    def bump():
        nonlocal count
        count += 1

    bump()
    bump()
    return count, bump


def test_cell_variables_are_the_cells_inner_functions_hold() -> None:
    cell = types.CellType(5)
    bump = types.FunctionType(next(c for c in counter.__code__.co_consts if isinstance(c, types.CodeType)),
                              globals(), "bump", None, (cell,))
    rest = resume_function(counter, offset_of_line(counter, 8), [], {"a": 5, "count": cell, "bump": bump}, NULL)
    assert rest()[0] == 6 and cell.cell_contents == 6  # one bump left to run, on the same cell


def test_a_null_slot_of_a_pending_call_is_restored() -> None:
    def calls(x):
        return abs(x - 10)

    # stop right after LOAD_GLOBAL pushed `abs` and the NULL a call of it needs
    instructions = list(dis.get_instructions(calls))
    load = next(i for i in instructions if i.argval == "abs")
    after = instructions[instructions.index(load) + 1]
    stack = [abs, NULL] if sys.version_info >= (3, 13) else [NULL, abs]  # the NULL moved above in 3.13
    assert resume_function(calls, after.offset, stack, {"x": 3}, NULL)() == 7
