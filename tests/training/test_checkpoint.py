"""Activation checkpointing inside a compiled module: `torch.utils.checkpoint.checkpoint` and
`checkpoint_sequential` are captured (no graph break), their regions are recomputed in the
backward, gradients equal eager's, and the bytes saved for the backward (measured with
saved_tensors_hooks) are fewer than without checkpointing."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

import minicompiler
from minicompiler.autograd.partition import CHECKPOINT


class Block(nn.Module):
    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.up, self.down, self.p = nn.Linear(16, 64), nn.Linear(64, 16), p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.dropout(F.gelu(self.up(x)), self.p, self.training))


class Net(nn.Module):
    """Three residual MLP blocks; `reentrant` None: no checkpointing."""

    def __init__(self, reentrant: bool | None, p: float = 0.0) -> None:
        super().__init__()
        self.blocks, self.reentrant = nn.ModuleList(Block(p) for _ in range(3)), reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x) if self.reentrant is None else checkpoint(block, x, use_reentrant=self.reentrant)
        return x.square().mean()


def activation_bytes_saved(model: nn.Module, x: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Run forward and backward; the bytes autograd saved for the backward, not counting the
    parameters and the input (which live anyway), and the loss."""
    live = {t.untyped_storage().data_ptr() for t in [*model.parameters(), x]}
    saved = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal saved
        if t.untyped_storage().data_ptr() not in live:
            saved += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(x)
    loss.backward()
    return saved, loss


@pytest.mark.parametrize("reentrant", [False, True], ids=["non_reentrant", "reentrant"])
def test_checkpoint_recomputes_region_and_saves_less(reentrant: bool) -> None:
    model = Net(reentrant)
    eager = copy.deepcopy(model)
    plain = Net(None)
    plain.load_state_dict(model.state_dict())
    x = torch.randn(8, 16, requires_grad=True)

    compiled = minicompiler.compile(model)
    saved, loss = activation_bytes_saved(compiled, x)
    eager_saved, eager_loss = activation_bytes_saved(eager, x.detach().requires_grad_())
    plain_saved, _ = activation_bytes_saved(minicompiler.compile(plain), x.detach().requires_grad_())

    torch.testing.assert_close(loss, eager_loss)
    for ours, theirs in zip(model.parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad)
    report = compiled.report
    assert not report.graph_breaks  # captured, not run eagerly
    assert "recomputed in the backward (checkpointed)" in report.graphs[0].stage("autograd").text
    print(f"\nactivation bytes saved: compiled {saved}, compiled without checkpoint {plain_saved}, "
          f"eager checkpoint {eager_saved}")
    assert saved < plain_saved


def test_random_draw_in_a_checkpoint_is_reused_not_redrawn() -> None:
    """Dropout inside the region: the backward uses the forward's mask (as torch's RNG replay does),
    so the checkpointed model's gradients equal the same compiled model's without checkpointing."""
    model, plain = Net(False, p=0.5), Net(None, p=0.5)
    plain.load_state_dict(model.state_dict())
    x = torch.randn(8, 16)
    losses = []
    for net in (model, plain):
        torch.manual_seed(0)
        losses.append(minicompiler.compile(net)(x))
        losses[-1].backward()
    torch.testing.assert_close(losses[0], losses[1])
    for ours, theirs in zip(model.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad)


def test_reentrant_without_grad_inputs_runs_as_torch() -> None:
    """Reentrant checkpoint gives no gradient when no argument requires one: capture refuses it and
    the call runs eagerly, with torch's result."""
    model = Net(True).eval()
    x = torch.randn(4, 16)
    compiled = minicompiler.compile(model)
    with pytest.warns(UserWarning, match="requires_grad"):
        out = compiled(x)
    with pytest.warns(UserWarning, match="requires_grad"):
        torch.testing.assert_close(out, model(x))
    assert any("no tensor argument requires grad" in b.reason for b in compiled.report.graph_breaks)


class SequentialNet(nn.Module):
    """Five blocks through checkpoint_sequential: two regions of two blocks, the last block as usual."""

    def __init__(self, segments: int, reentrant: bool) -> None:
        super().__init__()
        self.body, self.segments, self.reentrant = nn.Sequential(*[Block() for _ in range(5)]), segments, reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint_sequential(self.body, self.segments, x, use_reentrant=self.reentrant).square().mean()


@pytest.mark.parametrize("reentrant", [False, True], ids=["non_reentrant", "reentrant"])
@pytest.mark.parametrize("segments", [1, 3])
def test_checkpoint_sequential_is_captured_and_saves_less(segments: int, reentrant: bool) -> None:
    model = SequentialNet(segments, reentrant)
    eager = copy.deepcopy(model)
    x = torch.randn(8, 16, requires_grad=True)
    compiled = minicompiler.compile(model)
    saved, loss = activation_bytes_saved(compiled, x)
    _, eager_loss = activation_bytes_saved(eager, x.detach().requires_grad_())
    plain = copy.deepcopy(model)
    plain.forward = lambda x: plain.body(x).square().mean()
    plain_saved, _ = activation_bytes_saved(minicompiler.compile(plain), x.detach().requires_grad_())

    torch.testing.assert_close(loss, eager_loss)
    for ours, theirs in zip(model.parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad)
    assert not compiled.report.graph_breaks
    if segments == 1:  # one segment: nothing checkpointed, as in torch
        assert saved == plain_saved
    else:
        assert saved < plain_saved


def test_the_backward_recomputes_each_region_just_before_its_gradient() -> None:
    """Recomputed all at the start, the three regions' activations would be alive together (the
    H100 peak with checkpointing was above the peak without). Each region's recomputation comes
    right before the gradients that read it: the last block's first, the first block's last."""
    compiled = minicompiler.compile(Net(False))
    compiled(torch.randn(8, 16, requires_grad=True)).backward()
    backward = compiled.cache[0].compiled.artifacts["backward"]
    nodes = list(backward.compute_nodes())
    from_tangent = set(backward.inputs[-1:])  # the loss's gradient
    for node in nodes:
        if from_tangent & set(node.inputs()):
            from_tangent.add(node)
    first_of_region = {}
    for index, node in enumerate(nodes):
        if CHECKPOINT in node.tags:
            first_of_region.setdefault(node.tags[CHECKPOINT], index)
    gradient_positions = [i for i, node in enumerate(nodes) if node in from_tangent]
    regions = sorted(first_of_region, key=first_of_region.get)
    assert regions == sorted(regions, reverse=True)  # the last block's region is recomputed first
    assert first_of_region[regions[-1]] > gradient_positions[0]  # after gradients have begun
