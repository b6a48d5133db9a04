"""Conv+BN folding (seed 004): eval-mode batch norm folded into the convolution, from live values."""

from __future__ import annotations

import copy

import torch
from torch import nn

import minicompiler


def stage_notes(compiled: object, name: str) -> list[str]:
    """The step's notes; [] when the pass matched nothing (and so added no step)."""
    (graph_report,) = compiled.report.graphs
    return next((s.notes for s in graph_report.stages if s.name == name), [])


def conv_bn_relu(conv: nn.Module, bn: nn.Module) -> nn.Module:
    model = nn.Sequential(conv, bn, nn.ReLU())
    with torch.no_grad():  # running statistics that are not the identity, so a wrong fold shows
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        if bn.affine:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-1, 1)
    return model


def test_eval_conv_bn_relu_is_folded_and_matches_eager() -> None:
    model = conv_bn_relu(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)).eval()
    compiled = minicompiler.compile(model)
    x = torch.randn(2, 3, 10, 10)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    (note,) = stage_notes(compiled, "fold conv+bn")
    assert "folded into" in note
    (graph_report,) = compiled.report.graphs
    decomposed = next(s.text for s in graph_report.stages if s.name == "decompose")
    assert "batch_norm" not in decomposed  # one convolution is left


def test_the_fold_reads_live_parameters_and_running_statistics() -> None:
    model = conv_bn_relu(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)).eval()
    compiled = minicompiler.compile(model)
    x = torch.randn(2, 3, 10, 10)
    with torch.no_grad():
        compiled(x)
        conv, bn = model[0], model[1]
        bn.running_mean.add_(torch.randn(8))
        bn.running_var.mul_(torch.rand(8) + 0.5)
        bn.weight.mul_(-1)
        conv.weight.add_(0.1)
        torch.testing.assert_close(compiled(x), model(x))


def test_conv_without_bias_and_batch_norm_without_affine() -> None:
    model = conv_bn_relu(nn.Conv1d(4, 6, 3, bias=False), nn.BatchNorm1d(6, affine=False)).eval()
    compiled = minicompiler.compile(model)
    x = torch.randn(3, 4, 12)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    assert "folded into" in stage_notes(compiled, "fold conv+bn")[0]


def test_training_mode_is_not_folded() -> None:
    model = conv_bn_relu(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)).train()
    eager = copy.deepcopy(model)
    compiled = minicompiler.compile(model)
    x = torch.randn(4, 3, 8, 8)
    torch.testing.assert_close(compiled(x), eager(x))
    torch.testing.assert_close(model[1].running_mean, eager[1].running_mean)
    assert stage_notes(compiled, "fold conv+bn") == []


def test_a_convolution_read_elsewhere_is_not_folded() -> None:
    conv, bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4).eval()

    def both(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = conv(x)
        return y, bn(y)

    compiled = minicompiler.compile(both)
    x = torch.randn(1, 3, 6, 6)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), both(x))
    assert stage_notes(compiled, "fold conv+bn") == []


def test_gradients_through_a_folded_eval_batch_norm_equal_eager() -> None:
    model = conv_bn_relu(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).eval()
    compiled = minicompiler.compile(model)
    x = torch.randn(2, 3, 7, 7, requires_grad=True)
    compiled(x).square().sum().backward()
    got = [x.grad, *(p.grad for p in model.parameters())]
    x.grad = None
    model.zero_grad()
    model(x).square().sum().backward()
    for a, b in zip(got, [x.grad, *(p.grad for p in model.parameters())], strict=True):
        torch.testing.assert_close(a, b)


def test_the_folded_weight_is_kept_between_calls_until_a_tensor_changes() -> None:
    """The fold runs once, not on every call (TorchInductor's freezing folds once too): the second
    call computes no rsqrt, the third, after a running statistic changed, does."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))

    model = conv_bn_relu(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)).eval()
    compiled = minicompiler.compile(model)
    x = torch.randn(2, 3, 10, 10)
    with torch.no_grad():
        compiled(x)
        with Ops() as second:
            torch.testing.assert_close(compiled(x), model(x))
        model[1].running_var.mul_(2)
        with Ops() as third:
            torch.testing.assert_close(compiled(x), model(x))
    assert not any("rsqrt" in name for name in second.names)
    assert any("rsqrt" in name for name in third.names)


def test_the_wrapper_makes_its_folds_in_one_kept_prologue() -> None:
    """Every fold reading parameters alone is made by `kept_values`, which the wrapper's `kept`
    calls again only when one of the tensors it reads changes (runtime/kept.py)."""
    model = nn.Sequential(conv_bn_relu(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)),
                          conv_bn_relu(nn.Conv2d(8, 4, 3), nn.BatchNorm2d(4))).eval()
    compiled = minicompiler.compile(model)
    x = torch.randn(2, 3, 10, 10)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    (graph_report,) = compiled.report.graphs
    wrapper = next(s.text for s in graph_report.stages if s.name == "codegen").split("# ---- wrapper ----")[1]
    prologue, call = wrapper.split("def call(inputs):")
    assert prologue.startswith("\ndef kept_values(") and "= kept(kept_values, " in call
    assert len(prologue.strip().splitlines()) == 1 + 2 * 4 + 1  # def, four folds (comment + call), return


def test_kept_folds_follow_a_replaced_parameter_and_training_steps() -> None:
    model = conv_bn_relu(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)).eval()
    eager = copy.deepcopy(model)
    compiled = minicompiler.compile(model)
    x = torch.randn(2, 3, 10, 10)
    with torch.no_grad():
        compiled(x)
        new_weight = torch.randn_like(model[0].weight)
        model[0].weight, eager[0].weight = nn.Parameter(new_weight), nn.Parameter(new_weight.clone())
        torch.testing.assert_close(compiled(x), eager(x))
    # gradient steps between calls: each changes the weight in place, and the next call follows
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, eager)]
    for _ in range(3):
        for run, optimizer in zip((compiled, eager), optimizers, strict=True):
            optimizer.zero_grad()
            run(x).square().mean().backward()
            optimizer.step()
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), eager(x))
