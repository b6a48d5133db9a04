"""`with` blocks real model code uses: torch.no_grad() where inputs require grad (and its decorator form),
contextlib.nullcontext and user context managers (inlined), and the global-state questions libraries ask
(torch.is_grad_enabled, torch.is_autocast_enabled), answered at capture time and guarded."""

from __future__ import annotations

import contextlib

import torch
from torch import nn

import minicompiler


def gradients(fn, *inputs: torch.Tensor) -> list[torch.Tensor]:
    inputs = [t.detach().clone().requires_grad_() for t in inputs]
    fn(*inputs).sum().backward()
    return [t.grad for t in inputs]


def stopped_halfway(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        scale = (x * w).sigmoid()  # no gradient flows back through the scale
    return x * w * scale


class Rotary(nn.Module):
    """The shape of transformers' rotary embeddings: a forward decorated with @torch.no_grad()."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_freq", torch.rand(4))

    @torch.no_grad()
    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return (positions[:, None] * self.inv_freq[None, :]).cos()


class WithRotary(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear, self.rotary = nn.Linear(4, 4), Rotary()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.rotary(torch.arange(x.shape[0], dtype=torch.float32))


def test_no_grad_block_stops_the_gradient_as_eager_does() -> None:
    x, w = torch.randn(5, 3), torch.randn(3)
    compiled = minicompiler.compile(stopped_halfway)
    for got, expected in zip(gradients(compiled, x, w), gradients(stopped_halfway, x, w), strict=True):
        torch.testing.assert_close(got, expected)
    assert len(compiled.report.graphs) == 1 and not compiled.report.graph_breaks


def test_a_no_grad_decorated_submodule_is_captured_in_training() -> None:
    torch.manual_seed(0)
    model = WithRotary()
    compiled = minicompiler.compile(model)
    x = torch.randn(6, 4)
    compiled(x).sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for g, e in zip(got, [p.grad for p in model.parameters()], strict=True):
        torch.testing.assert_close(g, e)
    assert len(compiled.report.graphs) == 1 and not compiled.report.graph_breaks


class Scaled:
    """A user context manager: its __enter__ and __exit__ are plain Python, inlined by capture."""

    def __init__(self, factor: float) -> None:
        self.factor, self.open = factor, False

    def __enter__(self) -> float:
        self.open = True
        return self.factor

    def __exit__(self, *exc: object) -> None:
        self.open = False


def test_nullcontext_and_user_context_managers_are_inlined() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        with contextlib.nullcontext():
            y = x.cos()
        manager = Scaled(2.0)
        with manager as factor:
            y = y * factor if manager.open else y
        return y + 1 if not manager.open else y  # __exit__ ran

    compiled = minicompiler.compile(fn)
    x = torch.randn(8)
    torch.testing.assert_close(compiled(x), fn(x))
    assert len(compiled.report.graphs) == 1 and not compiled.report.graph_breaks


def test_global_state_questions_are_answered_and_guarded() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu"):
            return x.sin()
        return x.cos()

    compiled = minicompiler.compile(fn)
    x = torch.randn(8)
    torch.testing.assert_close(compiled(x), x.sin())
    with torch.no_grad():  # the guard on grad mode fails: compiled again, the other branch
        torch.testing.assert_close(compiled(x), x.cos())
    assert "torch.is_grad_enabled()" in (compiled.reports[-1].recompile_reason or "")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.testing.assert_close(compiled(x), x.cos())
    assert len(compiled.reports) == 3
