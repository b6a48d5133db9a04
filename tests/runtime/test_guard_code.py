"""The generated guard function of a cache entry (runtime/guard_code.py): it passes exactly when
every guard passes, and hands back the graph's inputs, the same tensors the sources read."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import minicompiler
from minicompiler.capture import first_failing_guard


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 3))
        self.scale = 2.0

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        y = self.layers(x) * self.scale
        return y if mask is None else y.masked_fill(mask, 0.0)


def _entry(compiled: minicompiler.CompiledModule):  # the CompiledFunction's one entry
    (entry,) = compiled._compiled.cache
    return entry


def test_passes_and_fetches_the_inputs_the_sources_read() -> None:
    model = Net().eval()
    compiled = minicompiler.compile(model, backend="eager")
    x = torch.randn(4, 6)
    compiled(x)
    entry = _entry(compiled)
    args = (x,)
    inputs = entry.check_and_fetch(args, {})
    expected = entry.captured.fetch_inputs(args, {})
    assert inputs is not None and len(inputs) == len(expected)
    assert all(a is b for a, b in zip(inputs, expected, strict=True))
    assert "def check_and_fetch" in entry.check_source and "self.training == False" in entry.check_source


def test_fails_exactly_when_a_guard_fails() -> None:
    x = torch.randn(4, 6)
    changes = [
        ((torch.randn(5, 6),), lambda model: None),  # another shape
        ((x.double(),), lambda model: None),  # another dtype
        ((x,), lambda model: setattr(model, "scale", 3.0)),  # a constant the graph baked in
        ((x,), lambda model: model.train()),  # training flags
        ((x,), lambda model: setattr(model.layers, "3", nn.Linear(5, 3))),  # another module object
        ((x, torch.ones(4, 3, dtype=torch.bool)), lambda model: None),  # an argument more
        ((), lambda model: None),  # an argument missing: the fetch itself fails
    ]
    for args, change in changes:
        model = Net().eval()
        compiled = minicompiler.compile(model, backend="eager")
        compiled(x)
        entry = _entry(compiled)
        assert entry.check_and_fetch((x,), {}) is not None
        change(model)
        assert first_failing_guard(entry.guards, args, {}) is not None
        assert entry.check_and_fetch(args, {}) is None


def test_compiled_results_follow_changes_after_the_fast_path() -> None:
    """Calls that take the generated check keep matching eager as things change under them."""
    torch.manual_seed(0)
    model = Net().eval()
    compiled = minicompiler.compile(model)
    x = torch.randn(4, 6)
    torch.testing.assert_close(compiled(x), model(x))
    with torch.no_grad():
        model.layers[0].weight.mul_(2)  # an in-place update: the fetched input sees it
    torch.testing.assert_close(compiled(x), model(x))
    model.scale = 3.0  # a guard fails: recompiled, not stale
    torch.testing.assert_close(compiled(x), model(x))
    y = torch.randn(7, 6)
    torch.testing.assert_close(compiled(y), model(y))


def test_each_path_is_read_once() -> None:
    """`self.layers` serves every guard and input below it: it is read into one local, once."""
    model = Net().eval()
    compiled = minicompiler.compile(model, backend="eager")
    compiled(torch.randn(4, 6))
    text = _entry(compiled).check_source
    assert text.count("._modules['layers']") == 1
    assert text.count("._modules['0']") == 1  # layers.0: its weight and bias are read from one local


class Odd(nn.Module):
    """Names no Python identifier could be: they must reach the guard code as literals."""

    def __init__(self) -> None:
        super().__init__()
        setattr(self, "odd name\nwith a newline", 2.0)
        self.table = {"key'\n\"": torch.randn(3), 1: torch.randn(3)}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * getattr(self, "odd name\nwith a newline") + self.table["key'\n\""] + self.table[1]


def test_hostile_names_are_written_as_literals() -> None:
    torch.manual_seed(0)
    model = Odd()
    compiled = minicompiler.compile(model)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), model(x))
    entry = _entry(compiled)
    assert entry.check_and_fetch((x,), {}) is not None
    setattr(model, "odd name\nwith a newline", 3.0)  # the guard on it fails: recompiled, not stale
    torch.testing.assert_close(compiled(x), model(x))
    model.table["key'\n\""] = torch.randn(3)
    torch.testing.assert_close(compiled(x), model(x))


def test_the_separate_memory_guard_reads_the_inputs_locals_and_fails_on_a_shared_memory() -> None:
    """Training batch norm changes its running statistics in place: the guard that no other input
    shares their memory is checked on the locals the inputs are fetched into (no second walk of
    every parameter's path), and fails when another input does share it."""
    model = Net().train()
    compiled = minicompiler.compile(model, backend="eager")
    x = torch.randn(4, 6)
    compiled(x)
    entry = _entry(compiled)
    text = entry.check_source
    (line,) = [line for line in text.splitlines() if "share no memory" in line]
    assert "fetch_" not in line and "((s" in line  # a tuple of the locals read for the inputs
    assert text.count("._parameters['weight']") == 3  # the two Linears' and the batch norm's, once each
    assert entry.check_and_fetch((x,), {}) is not None
    bn = model.layers[1]
    bn.running_mean = bn.running_var[:]  # the mean now shares the variance's memory
    assert first_failing_guard(entry.guards, (x,), {}).kind == "alias"
    assert entry.check_and_fetch((x,), {}) is None


def test_tensors_are_checked_together_once_a_call_has_passed() -> None:
    """The tensors' guards are one call to torch's TensorGuards after a call passed them one by one;
    that call fails where any of them would, and a tensor it was not shown (a subclass) still passes
    through the guards themselves."""
    x = torch.randn(4, 6)
    compiled = minicompiler.compile(Net().eval(), backend="eager")
    compiled(x)
    entry = _entry(compiled)
    assert "if not tensors.check(" in entry.check_source
    seen = entry.check_and_fetch.__globals__["tensors"]
    assert entry.check_and_fetch((x,), {}) is not None and entry.check_and_fetch((x,), {}) is not None
    if seen.guards is None:
        pytest.skip("this torch has no TensorGuards: each tensor's guard is checked in Python")
    namespace = entry.check_and_fetch.__globals__
    one_by_one = {f"holds_{n}": namespace[f"holds_{n}"] for n, g in enumerate(entry.guards) if g.static_tensor}
    namespace.update(dict.fromkeys(one_by_one, None))  # a tensor's own guard would raise now: not called
    assert entry.check_and_fetch((torch.randn(4, 6),), {}) is not None
    namespace.update(one_by_one)
    others = [torch.randn(6, 4).t(), x.double(), x.clone().requires_grad_(), torch.randn(4, 7)[:, :6], x[:2]]
    for other in others:
        assert first_failing_guard(entry.guards, (other,), {}) is not None
        assert entry.check_and_fetch((other,), {}) is None
    parameter = nn.Parameter(x.clone(), requires_grad=False)  # another type, the same tensor guard
    assert entry.check_and_fetch((parameter,), {}) is not None
    assert entry.check_and_fetch((x,), {})[0] is x
