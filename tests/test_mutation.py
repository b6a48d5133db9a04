"""In-place updates of inputs, parameters and buffers (functionalization).

The graph computes each changed input's new value as an extra output; the runtime copies it into
the caller's tensor. Every test runs eager on a copy of the same state and compares everything:
outputs, the changed tensors, and gradients, over several calls with fresh inputs.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import minicompiler


def test_changing_an_argument_in_place() -> None:
    def fn(x, y):
        x.add_(1)
        y.mul_(x.sum())
        return x * y

    compiled = minicompiler.compile(fn)
    for _ in range(3):
        x, y = torch.randn(4, 3), torch.randn(3)
        x_eager, y_eager = x.clone(), y.clone()
        torch.testing.assert_close(compiled(x, y), fn(x_eager, y_eager))
        torch.testing.assert_close(x, x_eager)
        torch.testing.assert_close(y, y_eager)
    assert len(compiled.reports) == 1 and not compiled.report.graph_breaks and not compiled.report.eager_fallback


class RunningMean(nn.Module):
    """The running-statistics pattern: a buffer updated in place with a chained in-place op."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("running", torch.zeros(5))
        self.linear = nn.Linear(5, 5)

    def forward(self, x):
        y = self.linear(x)
        self.running.mul_(0.9).add_(0.1 * x.mean(0))
        return y - self.running


def test_updating_a_buffer_with_gradients() -> None:
    torch.manual_seed(0)
    model = RunningMean()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model)
    for _ in range(3):
        x = torch.randn(8, 5)
        compiled(x).pow(2).sum().backward()
        reference(x).pow(2).sum().backward()
        torch.testing.assert_close(model.running, reference.running)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)
    assert len(compiled.reports) == 1 and not compiled.report.graph_breaks


def test_detach_of_a_value_that_needs_a_gradient_matches_eager() -> None:
    def fn(x, w):
        y = x * w
        return y * y.detach().sum()  # d/dw treats the sum as a constant

    w = torch.randn(4, requires_grad=True)
    w_eager = w.detach().clone().requires_grad_()
    compiled = minicompiler.compile(fn)
    for _ in range(2):
        x = torch.randn(4)
        compiled(x, w).pow(2).sum().backward()
        fn(x, w_eager).pow(2).sum().backward()
        torch.testing.assert_close(w.grad, w_eager.grad)
    report = compiled.report
    assert report.graph_breaks == [] and "detach" in report.graphs[0].stage("capture").text


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize(("module", "shape"), [(nn.BatchNorm1d, (8, 6)), (nn.BatchNorm1d, (4, 6, 5)),
                                               (nn.BatchNorm2d, (4, 6, 3, 3))])
def test_batch_norm_in_training_mode(module: type[nn.Module], shape: tuple[int, ...], momentum: float | None) -> None:
    torch.manual_seed(0)
    model = module(6, momentum=momentum)
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model)
    for _ in range(3):
        x = torch.randn(*shape, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        out, expected = compiled(x), reference(x_eager)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
        out.sin().sum().backward()
        expected.sin().sum().backward()
        torch.testing.assert_close(x.grad, x_eager.grad, atol=1e-4, rtol=1e-4)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-4)
        for b, c in zip(model.buffers(), reference.buffers(), strict=True):  # running stats and the count
            torch.testing.assert_close(b, c)
    report = compiled.report
    assert not report.graph_breaks and not report.eager_fallback and report.graphs[0].fallback is None
    assert "torch_call" not in report.graphs[0].stage("capture").text  # no batch_norm kept whole


def test_batch_norm_switches_between_train_and_eval() -> None:
    torch.manual_seed(0)
    model = nn.BatchNorm1d(4)
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model)
    for training in (True, False, True):
        model.train(training)
        reference.train(training)
        x = torch.randn(6, 4)
        torch.testing.assert_close(compiled(x), reference(x), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(model.running_var, reference.running_var)
    assert len(compiled.reports) == 2  # one graph per mode, the third call reuses the first


def test_write_back_happens_before_a_graph_break(capsys: pytest.CaptureFixture[str]) -> None:
    def fn(x):
        x.mul_(2)
        print(x)  # a graph break: the real x must already hold its new value
        return x + 1

    x = torch.randn(3)
    x_eager = x.clone()
    expected = fn(x_eager)
    printed_eager = capsys.readouterr().out
    compiled = minicompiler.compile(fn)
    torch.testing.assert_close(compiled(x), expected)
    assert capsys.readouterr().out == printed_eager
    torch.testing.assert_close(x, x_eager)
    assert len(compiled.report.graph_breaks) == 1


def test_inputs_sharing_memory_with_a_changed_input_break_at_the_change() -> None:
    def fn(x, y):
        x.add_(1)
        return y * 2  # eager: y sees x's update when y is a view of x

    compiled = minicompiler.compile(fn)
    for aliased in (False, True):
        x = torch.randn(4)
        y = x.view(2, 2) if aliased else torch.randn(2, 2)
        x_eager = x.clone()
        y_eager = x_eager.view(2, 2) if aliased else y.clone()
        torch.testing.assert_close(compiled(x, y), fn(x_eager, y_eager))
        torch.testing.assert_close(x, x_eager)
    assert "share no memory" in compiled.report.recompile_reason
    # inputs in one memory share a storage in capture: the change is a break, made for real
    assert compiled.report.eager_fallback is None
    assert ["view of its memory" in b.reason for b in compiled.report.graph_breaks] == [True]
