"""A compiled optimizer step: parameters and optimizer state equal eager torch.optim's after several steps."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from minicompiler.optim import compile_optimizer

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


@pytest.mark.parametrize(("optimizer", "settings"), OPTIMIZERS, ids=lambda o: getattr(o, "__name__", ""))
def test_compiled_step_equals_eager(optimizer: type, settings: dict) -> None:
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 3))
    eager_model = copy.deepcopy(model)
    opt, eager_opt = optimizer(model.parameters(), **settings), optimizer(eager_model.parameters(), **settings)
    batches = [torch.randn(5, 6) for _ in range(4)]
    step = compile_optimizer(opt)
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


def test_unwritten_options_say_so() -> None:
    opt = torch.optim.Adam(nn.Linear(2, 2).parameters(), amsgrad=True)
    with pytest.raises(NotImplementedError, match="amsgrad"):
        compile_optimizer(opt)()
