"""A compiled optimizer step: parameters and optimizer state equal eager torch.optim's after several steps,
made by compile_optimizer(opt) or minicompiler.compile(opt.step); settings not written fall back to torch's step
with a warning; opt.step() inside a compiled training step breaks the graph with a reason and still trains."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import minicompiler
from minicompiler.optim import CompiledOptimizerStep, compile_optimizer

OPTIMIZERS = [
    (torch.optim.SGD, {"lr": 0.1}),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "nesterov": True}),
    (torch.optim.Adam, {"lr": 0.01, "weight_decay": 0.01}),
    (torch.optim.AdamW, {"lr": 0.01, "weight_decay": 0.1}),
]


def train(model: nn.Module, step: object, opt: torch.optim.Optimizer, batches: list[torch.Tensor]) -> None:
    for x in batches:
        opt.zero_grad()
        model(x).square().mean().backward()
        step()


@pytest.mark.parametrize("make", [compile_optimizer, lambda opt: minicompiler.compile(opt.step)],
                         ids=["compile_optimizer", "compile_opt_step"])
@pytest.mark.parametrize(("optimizer", "settings"), OPTIMIZERS, ids=lambda o: getattr(o, "__name__", ""))
def test_compiled_step_equals_eager(optimizer: type, settings: dict, make: object) -> None:
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    eager_model = copy.deepcopy(model)
    opt, eager_opt = optimizer(model.parameters(), **settings), optimizer(eager_model.parameters(), **settings)
    batches = [torch.randn(5, 6) for _ in range(4)]
    step = make(opt)
    assert isinstance(step, CompiledOptimizerStep)
    train(model, step, opt, batches)
    train(eager_model, eager_opt.step, eager_opt, batches)
    torch.testing.assert_close(list(model.parameters()), list(eager_model.parameters()))
    ours, theirs = opt.state_dict()["state"], eager_opt.state_dict()["state"]
    assert ours.keys() == theirs.keys()
    for key in theirs:
        torch.testing.assert_close(ours[key], theirs[key])
    report = step.report
    assert not report.graph_breaks
    n_params = len(list(model.parameters()))
    for graph in report.graphs:  # one fused update per parameter (Adam: + one for its step counter)
        assert 0 < len(graph.kernels) <= 2 * n_params


@pytest.mark.parametrize(("optimizer", "settings", "reason"), [
    (torch.optim.Adam, {"lr": 0.01, "amsgrad": True}, "amsgrad"),
    (torch.optim.RMSprop, {"lr": 0.01}, "only Adam, AdamW and SGD"),
], ids=["amsgrad", "RMSprop"])
def test_unwritten_settings_fall_back_with_a_reason(optimizer: type, settings: dict, reason: str) -> None:
    model = nn.Linear(4, 3)
    eager_model = copy.deepcopy(model)
    opt, eager_opt = optimizer(model.parameters(), **settings), optimizer(eager_model.parameters(), **settings)
    batches = [torch.randn(5, 4) for _ in range(3)]
    step = minicompiler.compile(opt.step)
    with pytest.warns(UserWarning, match=reason):
        train(model, step, opt, batches)
    train(eager_model, eager_opt.step, eager_opt, batches)
    assert reason in step.fallback
    torch.testing.assert_close(list(model.parameters()), list(eager_model.parameters()))


def test_closure_runs_first_and_its_loss_is_returned() -> None:
    model = nn.Linear(4, 1)
    eager_model = copy.deepcopy(model)
    opt, eager_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(eager_model.parameters(), lr=0.1)
    x = torch.randn(6, 4)

    def closure_for(m: nn.Module, o: torch.optim.Optimizer) -> object:
        def closure() -> torch.Tensor:
            o.zero_grad()
            loss = m(x).square().mean()
            loss.backward()
            return loss
        return closure

    loss = minicompiler.compile(opt.step)(closure_for(model, opt))
    torch.testing.assert_close(loss, eager_opt.step(closure_for(eager_model, eager_opt)))
    torch.testing.assert_close(list(model.parameters()), list(eager_model.parameters()))


@pytest.mark.parametrize(("optimizer", "settings"), OPTIMIZERS[1:], ids=lambda o: getattr(o, "__name__", ""))
def test_step_inside_a_compiled_training_step(optimizer: type, settings: dict) -> None:
    """zero_grad, backward and step inside one compiled function: the step is a graph break that says
    how to get fused kernels, runs torch's step, and training matches eager."""
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    eager_model = copy.deepcopy(model)
    opt, eager_opt = optimizer(model.parameters(), **settings), optimizer(eager_model.parameters(), **settings)

    def training_step(m: nn.Module, o: torch.optim.Optimizer, x: torch.Tensor) -> torch.Tensor:
        o.zero_grad()
        loss = m(x).square().mean()
        loss.backward()
        o.step()
        return loss

    compiled_step = minicompiler.compile(training_step)
    for _ in range(3):
        x = torch.randn(5, 6)
        torch.testing.assert_close(compiled_step(model, opt, x), training_step(eager_model, eager_opt, x))
    torch.testing.assert_close(list(model.parameters()), list(eager_model.parameters()))
    reasons = [b.reason for b in compiled_step.report.graph_breaks]
    assert any("step() runs torch's own step" in r and "minicompiler.compile(opt.step)" in r for r in reasons)
