"""minicompiler.fail_on_recompile(): inside it, a call that compiles its function again raises."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

import minicompiler
from minicompiler import logs
from minicompiler.recompiles import RecompileError


def double(x):
    return x * 2


def with_print(x):
    y = torch.cos(x)
    print("between graphs")
    return torch.sin(y)


def test_a_new_shape_inside_the_block_raises_with_the_failed_guard():
    compiled = minicompiler.compile(double, backend="eager")
    x = torch.randn(8)
    torch.testing.assert_close(compiled(x), double(x))  # warm-up, outside the block
    with minicompiler.fail_on_recompile():
        fresh = torch.randn(8)
        torch.testing.assert_close(compiled(fresh), double(fresh))  # guards pass: no compilation
        with pytest.raises(RecompileError) as caught:
            compiled(torch.randn(3, 2))
    assert len(compiled.reports) == 2
    assert caught.value.report is compiled.reports[-1]
    assert compiled.reports[-1].recompile_reason in str(caught.value)
    assert "guard failed" in str(caught.value) and "double" in str(caught.value)


def test_a_first_compilation_inside_the_block_raises_too():
    # as torch.compiler.set_stance("fail_on_recompile"): compile before entering
    compiled = minicompiler.compile(double, backend="eager")
    with minicompiler.fail_on_recompile(), pytest.raises(RecompileError, match="a first compilation"):
        compiled(torch.randn(8))
    assert len(compiled.reports) == 1


def test_new_sizes_compiled_for_a_dynamic_entry_raise():
    # reduce-overhead records CUDA graphs for one set of sizes, so a size seen changing gets a
    # graph of its own for each new size: compilations whose reports name no failed guard
    compiled = minicompiler.compile(double, backend="eager", mode="reduce-overhead")
    for n in (8, 9):
        compiled(torch.randn(n, 4))
    with minicompiler.fail_on_recompile():
        fresh = torch.randn(9, 4)
        torch.testing.assert_close(compiled(fresh), double(fresh))
        with pytest.raises(RecompileError):
            compiled(torch.randn(10, 4))


def test_outside_the_block_a_recompile_is_silent_and_the_block_ends_even_on_an_error():
    compiled = minicompiler.compile(double, backend="eager")
    compiled(torch.randn(8))
    with pytest.raises(RecompileError), minicompiler.fail_on_recompile():
        compiled(torch.randn(4, 4))
    y = torch.randn(5, 5)
    torch.testing.assert_close(compiled(y), double(y))  # compiles again, no error
    assert len(compiled.reports) == 3


def test_the_entry_compiled_by_the_failing_call_stays_cached():
    # minicompiler checks a compilation as it finishes (TorchDynamo refuses before compiling):
    # the call that recompiled raises, the next call with the same shapes finds its entry
    compiled = minicompiler.compile(double, backend="eager")
    compiled(torch.randn(8))
    with minicompiler.fail_on_recompile():
        with pytest.raises(RecompileError):
            compiled(torch.randn(6))
        x = torch.randn(6)
        torch.testing.assert_close(compiled(x), double(x))
    assert len(compiled.reports) == 2


def test_a_module_attribute_changed_every_call_raises_naming_it():
    class Counter(nn.Module):  # seed 003's BadStatefulModel
        def __init__(self):
            super().__init__()
            self.counter = 0

        def forward(self, x):
            self.counter += 1
            return x * self.counter

    compiled = minicompiler.compile(Counter(), backend="eager")
    compiled(torch.randn(4))
    with minicompiler.fail_on_recompile(), pytest.raises(RecompileError, match=r"self\.counter"):
        compiled(torch.randn(4))


def test_generated_code_recompiles_raise_too():
    compiled = minicompiler.compile(double, backend="cpp")
    x = torch.randn(16)
    torch.testing.assert_close(compiled(x), double(x))
    with minicompiler.fail_on_recompile(), pytest.raises(RecompileError):
        compiled(torch.randn(16, dtype=torch.float64))


def test_the_recompile_is_logged_before_the_error(capsys, monkeypatch):
    monkeypatch.delenv(logs.ENV_VAR, raising=False)
    logs.set_logs(recompiles=True)
    try:
        compiled = minicompiler.compile(double, backend="eager")
        compiled(torch.randn(8))
        with minicompiler.fail_on_recompile(), pytest.raises(RecompileError):
            compiled(torch.randn(2, 2))
    finally:
        logs.set_logs()
    assert "[minicompiler.recompiles] Recompiling function double" in capsys.readouterr().err


def test_a_segment_after_a_graph_break_compiled_again_raises(capsys):
    compiled = minicompiler.compile(with_print, backend="eager")
    compiled(torch.randn(8))
    with minicompiler.fail_on_recompile(), pytest.raises(RecompileError):
        compiled(torch.randn(2, 3))
    assert "between graphs" in capsys.readouterr().out  # the call ran before it raised


def test_other_threads_are_not_inside_the_block():
    compiled = minicompiler.compile(double, backend="eager")
    compiled(torch.randn(8))
    errors: list[BaseException] = []

    def recompile_elsewhere():
        try:
            compiled(torch.randn(7, 7))
        except BaseException as error:  # noqa: BLE001 - recorded for the assertion below
            errors.append(error)

    with minicompiler.fail_on_recompile():
        thread = threading.Thread(target=recompile_elsewhere)
        thread.start()
        thread.join()
    assert errors == [] and len(compiled.reports) == 2


def test_through_torch_compile_a_new_signature_of_a_dynamo_graph_raises():
    # dynamic=True: Dynamo passes one graph with sizes as inputs; minicompiler.backend compiles it
    # per input signature, so new sizes are a recompile of ours (Dynamo's own recompiles are
    # caught by torch.compiler.set_stance("fail_on_recompile"))
    torch._dynamo.reset()
    compiled = torch.compile(double, backend=minicompiler.backend, dynamic=True)
    x = torch.randn(8)
    torch.testing.assert_close(compiled(x), double(x))
    with minicompiler.fail_on_recompile(), pytest.raises(RecompileError, match="input signature changed"):
        compiled(torch.randn(9))
    torch._dynamo.reset()
