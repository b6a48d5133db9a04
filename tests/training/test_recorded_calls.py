"""A library call in a training step (attention) keeps its backward from the forward
(autograd/recorded.py, ir/recorded_calls.py): it runs once per step, as in eager, not again in the
backward, and every gradient matches eager's."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile

import minicompiler


class Attention(nn.Module):
    def __init__(self, width: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.qkv, self.out, self.heads = nn.Linear(width, 3 * width), nn.Linear(width, width), heads

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).reshape(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(batch, length, width))


def attention_forwards(model, x: torch.Tensor, mask: torch.Tensor) -> int:  # noqa: ANN001 - a callable
    """How many times a training step of `model` runs an attention forward (not its backward)."""
    with profile(activities=[ProfilerActivity.CPU]) as trace:
        model(x, mask).square().sum().backward()
    names = [e.name for e in trace.events()]
    return sum("scaled_dot_product" in n and "backward" not in n and n.startswith("aten::_") for n in names)


def assert_same_gradients(model: nn.Module, reference: nn.Module, x: torch.Tensor, x_ref: torch.Tensor) -> None:
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-4, atol=1e-5)
    for (name, got), want in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_attention_runs_once_per_training_step_and_its_gradients_are_eagers() -> None:
    torch.manual_seed(0)
    model = Attention()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model)
    for _ in range(2):  # the second step runs what the first compiled
        x = torch.randn(2, 8, 32, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        mask = torch.rand(8, 8) > 0.3
        model.zero_grad()
        reference.zero_grad()
        compiled_forwards = attention_forwards(compiled, x, mask)
        eager_forwards = attention_forwards(reference, x_ref, mask)
        assert_same_gradients(model, reference, x, x_ref)
    assert compiled_forwards == eager_forwards >= 1
    autograd = next(s.text for g in compiled.report.graphs for s in g.stages if s.name == "autograd")
    assert "scaled_dot_product_attention keeps its backward from the forward" in autograd
    backward = next(s.text for g in compiled.report.graphs for s in g.stages if s.name == "codegen (backward)")
    assert "recorded_vjps(" in backward and "torch_call_vjps(" not in backward


def test_a_second_backward_through_a_retained_graph_gets_the_same_gradients() -> None:
    torch.manual_seed(0)
    model = Attention()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model)
    x = torch.randn(2, 8, 32, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    mask = torch.ones(8, 8, dtype=torch.bool).tril()
    compiled(x, mask)  # compiles
    loss, loss_ref = compiled(x, mask).square().sum(), reference(x_ref, mask).square().sum()
    for _ in range(2):  # gradients accumulate: twice the first
        loss.backward(retain_graph=True)
        loss_ref.backward(retain_graph=True)
    assert_same_gradients(model, reference, x, x_ref)


def test_a_checkpointed_call_is_still_run_again_in_the_backward() -> None:
    """torch.utils.checkpoint asks for the recomputation: the call keeps it."""
    torch.manual_seed(0)
    model = Attention()
    reference = copy.deepcopy(model)

    def checkpointed(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(model, x, mask, use_reentrant=False)

    compiled = minicompiler.compile(checkpointed)
    x = torch.randn(2, 8, 32, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    mask = torch.rand(8, 8) > 0.3
    compiled(x, mask).square().sum().backward()
    reference(x_ref, mask).square().sum().backward()
    assert_same_gradients(model, reference, x, x_ref)
    autograd = next(s.text for g in compiled.report.graphs for s in g.stages if s.name == "autograd")
    assert "keeps its backward from the forward" not in autograd


def test_gradients_come_from_the_recorded_node_itself_where_it_takes_the_arguments() -> None:
    from minicompiler.ir.recorded_calls import TAPE, _from_the_node, recorded_call, recorded_vjps

    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    mask = torch.randn(16, 16)
    token = TAPE.set({})
    try:
        out = recorded_call("attention", (0, 1, 2), F.scaled_dot_product_attention, q, k, v, mask)
        recorded, leaves = TAPE.get()["attention"]
        assert sorted(leaves) == [0, 1, 2]  # the mask is no leaf: torch keeps its fused attention
        grad = torch.randn_like(out)
        direct = _from_the_node(recorded, [leaves[0], leaves[1], leaves[2]], grad)
        assert direct is not None  # the attention node's inputs are the leaves: called directly
        engine = torch.autograd.grad(recorded, [leaves[0], leaves[1], leaves[2]], grad, retain_graph=True)
        for mine, theirs in zip(direct, engine, strict=True):
            torch.testing.assert_close(mine, theirs)
        got = recorded_vjps("attention", out, F.scaled_dot_product_attention, (0, 1, 2), grad, q, k, v, mask)
        for mine, theirs in zip(got, engine, strict=True):
            torch.testing.assert_close(mine, theirs)
        # two ops after the arguments: the engine runs them both
        x = torch.randn(5)
        recorded_call("twice", (0,), lambda t: (t * 2).sin(), x)
        recorded, leaves = TAPE.get()["twice"]
        assert _from_the_node(recorded, [leaves[0]], torch.ones(5)) is None
        (gradient,) = recorded_vjps("twice", recorded.detach(), lambda t: (t * 2).sin(), (0,), torch.ones(5), x)
        torch.testing.assert_close(gradient, 2 * torch.cos(2 * x))
    finally:
        TAPE.reset(token)


class BiasedAttention(Attention):
    """Swin's and T5's kind: the mask given by keyword holds a learned position bias."""

    def __init__(self, length: int = 8, heads: int = 4) -> None:
        super().__init__(heads=heads)
        self.bias = nn.Parameter(0.1 * torch.randn(heads, length, length))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return super().forward(x, mask + self.bias)


def test_a_mask_that_needs_a_gradient_by_keyword_is_differentiated_by_minicompiler() -> None:
    torch.manual_seed(0)
    model = BiasedAttention()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model)
    x, mask = torch.randn(2, 8, 32), torch.randn(8, 8)
    x_mine, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    compiled(x_mine, mask).square().sum().backward()
    reference(x_ref, mask).square().sum().backward()
    assert_same_gradients(model, reference, x_mine, x_ref)
    assert [g.fallback for r in compiled.reports for g in r.graphs] == [None]  # not torch autograd's
