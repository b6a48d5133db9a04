"""What capture refuses: each refusal names the reason, the user's line and the instruction."""

from __future__ import annotations

import inspect
import threading

import pytest
import torch
from torch import nn

from minicompiler.capture import Unsupported, capture

LOCK = threading.Lock()  # a context manager written in C: nothing to inline


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def refusal(fn, *args, **kwargs) -> Unsupported:
    with pytest.raises(Unsupported) as info:
        capture(fn, args, kwargs)
    return info.value


def uses_print(x):
    y = x + 1
    print(y)
    return y


def uses_item(x):
    y = x * 2
    s = y.sum().item()
    return y + s


def branches_on_tensor(x):
    if x.sum() > 0:
        return x
    return -x


def mutates_a_view_of_input(x):
    x[0].add_(1)
    return x


def test_print_names_line_and_instruction() -> None:
    error = refusal(uses_print, torch.randn(3))
    assert error.loc.lineno == line_of(uses_print, "print(y)")
    assert error.loc.line == "print(y)" and error.instruction == "CALL"
    assert "print()" in error.reason
    assert str(error).startswith(f"test_capture_unsupported.py:{error.loc.lineno} `print(y)`: print()")


def test_item_reads_a_value() -> None:
    error = refusal(uses_item, torch.randn(3))
    assert error.loc.lineno == line_of(uses_item, ".item()")
    assert error.reason == "Tensor.item() reads a tensor's value"
    assert str(error).endswith("Tensor.item() reads a tensor's value (CALL)")


def test_branch_on_tensor_value() -> None:
    error = refusal(branches_on_tensor, torch.randn(3))
    assert error.loc.lineno == line_of(branches_on_tensor, "if x.sum() > 0")
    assert "data-dependent" in error.reason


def test_bytecode_listing_marks_the_break() -> None:
    error = refusal(uses_print, torch.randn(3))
    statuses = {r.status for r in error.bytecode}
    assert {"captured", "break", "not reached"} <= statuses
    (broken,) = [r for r in error.bytecode if r.status == "break"]
    assert broken.opname == "CALL" and broken.lineno == error.loc.lineno


def test_in_place_on_a_view_of_an_input_is_refused() -> None:
    assert "in place" in refusal(mutates_a_view_of_input, torch.randn(3, 2)).reason


def test_in_place_on_an_input_that_requires_grad_is_refused() -> None:
    def fn(x):
        x.mul_(2)
        return x

    assert "requires grad" in refusal(fn, torch.randn(3, requires_grad=True)).reason


def test_in_place_on_a_viewed_tensor_is_refused() -> None:
    def fn(x):
        y = x * 2
        v = y.view(-1)
        y.add_(1)
        return v

    assert "view" in refusal(fn, torch.randn(2, 2)).reason


def test_error_inside_inlined_function_points_at_callee_line() -> None:
    def callee(t):
        return t.tolist()

    def caller(x):
        return callee(x)

    error = refusal(caller, torch.randn(2))
    assert error.loc.function.endswith("callee") and error.loc.lineno == line_of(callee, "tolist")
    assert {r.function.split(".")[-1] for r in error.bytecode if r.status == "break"} == {"callee", "caller"}


@pytest.mark.parametrize(
    "fn, reason",
    [
        (lambda x: x.tolist(), "reads a tensor's values"),
        (lambda x: float(x), "reads the tensor's value"),
        (lambda x: x[[0, 1], [1, 0]], "advanced indexing"),  # two lists (one short list, or tensors, are captured)
        (lambda x: torch.nonzero(x), "data-dependent shape"),
        (lambda x: x.to("meta"), "moving a tensor"),
        (lambda x: (y for y in x), "returning"),
        (lambda x: x.new_thing(), "no attribute"),
        (lambda x: torch.relu_(x), "in place"),
    ],
)
def test_reasons(fn, reason: str) -> None:
    assert reason in refusal(fn, torch.randn(3)).reason


def test_with_blocks_on_managers_written_in_c_are_refused() -> None:
    def with_block(x):
        with LOCK:
            return x + 1

    assert "`with` on" in refusal(with_block, torch.randn(2)).reason


def test_side_effects_on_objects_are_refused() -> None:
    class Cache(nn.Module):
        def forward(self, x):
            self.last = x
            return x

    def appends(x, out):
        out.append(x)
        return x

    assert "attribute" in refusal(Cache(), torch.randn(2)).reason
    assert "passed in" in refusal(appends, torch.randn(2), []).reason


def test_shape_errors_become_unsupported_not_tracebacks() -> None:
    error = refusal(lambda x, y: x @ y, torch.randn(2, 3), torch.randn(2, 3))
    assert "failed at capture time" in error.reason


def test_training_mode_dropout_is_captured_but_hooks_are_not() -> None:
    layer = nn.Linear(2, 2)
    layer.register_forward_hook(lambda *a: None)
    assert "hooks" in refusal(layer, torch.randn(2)).reason
