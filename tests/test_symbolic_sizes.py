"""Dynamic shapes, graph side: with dynamic dims the graph is captured once with symbolic sizes
(`float32[s0, s1, 16]`), and one compiled program serves every size its size guards allow.

Every case compares with eager on fresh inputs of several sizes, and counts compilations."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minicompiler
from minicompiler.bench.models import MiniTransformer

SEQUENCE_LENGTHS = (32, 64, 128, 256)  # seed 003's loop
BACKENDS = ("cpp", "triton")


def device_for(backend: str) -> str:
    """Triton runs CUDA tensors on a GPU machine, CPU tensors through TRITON_INTERPRET=1 in CI."""
    on_gpu = backend == "triton" and torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    return "cuda" if on_gpu else "cpu"


class DynamicShapeModel(nn.Module):
    """Seed 003's model for the loop over sequence lengths (d_model shrunk)."""

    def __init__(self, d_model: int = 16) -> None:
        super().__init__()
        self.linear = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x))


def attention(x: torch.Tensor) -> torch.Tensor:
    scores = x @ x.transpose(-2, -1) * x.shape[-1] ** -0.5  # (B, T, T)
    return F.softmax(scores, dim=-1) @ x


def rows_then_back(x: torch.Tensor) -> torch.Tensor:
    batch, length, width = x.shape  # symbols, unpacked like numbers
    rows = x.reshape(batch * length, width).relu()
    return rows.sum(-1).view(batch, -1) + torch.ones(batch, length)


@pytest.mark.parametrize("backend", BACKENDS)
def test_seed_003_sequence_lengths_run_on_one_compiled_program(backend: str) -> None:
    model = DynamicShapeModel().to(device_for(backend))
    compiled = minicompiler.compile(model, backend=backend, dynamic=True)
    for length in SEQUENCE_LENGTHS:
        x = torch.randn(4, length, 16, device=device_for(backend))
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
    assert len(compiled.reports) == 1 and len(compiled.cache) == 1
    report = compiled.report
    assert "s1 = x.shape[1] (a symbol in the graph)" in report.dynamic
    capture_text = report.graphs[0].stages[0].text
    assert 'x: "float32[s0, s1, s2]"' in capture_text and "float32[s0, s1, 16]" in capture_text
    assert "size guard: s2 == 16" in report.dynamic  # the Linear's weight fixes the width
    assert "size guard: s2 == 16" in report.graphs[0].guards  # listed with the graph's other guards


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_with_symbolic_sizes_gets_eager_gradients(backend: str) -> None:
    model = DynamicShapeModel().to(device_for(backend))
    compiled = minicompiler.compile(model, backend=backend, dynamic=True)
    for length in (8, 24, 40):
        x = torch.randn(3, length, 16, device=device_for(backend))
        model.zero_grad()
        compiled(x).square().sum().backward()
        got = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        model(x).square().sum().backward()
        for mine, eager in zip(got, [p.grad for p in model.parameters()], strict=True):
            torch.testing.assert_close(mine, eager, atol=1e-4, rtol=1e-4)
    assert len(compiled.reports) == 1
    backward = compiled.report.graphs[0].autograd[-1].text
    assert "s1" in backward  # the backward graph is symbolic too


def shifted_pairs(x: torch.Tensor) -> torch.Tensor:
    return x[:, :-1] * x[:, 1:]  # slices that end at s1 - 1 and start at 1


def statistics(x: torch.Tensor) -> torch.Tensor:
    return x.mean(1) + x.var(1) - x.std(0).sum()  # counts s1 and s0 - 1 read from the kernel's sizes


@pytest.mark.parametrize("fn", [attention, rows_then_back, shifted_pairs])
def test_shape_arithmetic_stays_symbolic(fn) -> None:
    compiled = minicompiler.compile(fn, dynamic=True)
    for length in (8, 12, 20):
        x = torch.randn(2, length, 16)
        torch.testing.assert_close(compiled(x), fn(x), atol=1e-5, rtol=1e-5)
    assert len(compiled.reports) == 1, compiled.symbolic_off


@pytest.mark.parametrize("backend", BACKENDS)
def test_counts_inside_kernels_are_symbolic(backend: str) -> None:
    compiled = minicompiler.compile(statistics, backend=backend, dynamic=True)
    for length in (8, 12, 20):
        x = torch.randn(3, length, 5, device=device_for(backend))
        torch.testing.assert_close(compiled(x), statistics(x), atol=1e-5, rtol=1e-5)
    assert len(compiled.reports) == 1, compiled.symbolic_off
    assert not [line for line in compiled.report.dynamic if "==" in line]  # nothing specialized


@pytest.mark.parametrize("backend", BACKENDS)
def test_sizes_stay_symbolic_across_a_graph_break(backend: str, capsys) -> None:
    def fn(x):
        b, t = x.shape
        y = x.cos() * t
        print("between the graphs")  # a graph break: b, t and y are alive across it
        return (y.sin() + b).reshape(b * t)

    compiled = minicompiler.compile(fn, backend=backend, dynamic=True)
    for n in (4, 6, 9):
        x = torch.randn(n, n + 1, device=device_for(backend))
        torch.testing.assert_close(compiled(x), fn(x))
    assert capsys.readouterr().out.count("between the graphs") == 6  # once a call, compiled or eager
    report = compiled.report
    assert len(compiled.reports) == 1 and len(report.graphs) == 2 and len(report.graph_breaks) == 1
    # in the second graph the ints b and t are the symbols of y's dims, guarded to stay equal
    assert any(line.endswith("= b (a symbol in the graph)") for line in report.dynamic)
    assert not [line for line in report.dynamic if "==" in line and line.split("==")[1].strip().isdigit()]


def test_a_size_guard_that_fails_compiles_for_that_size() -> None:
    def fn(x):
        if x.shape[0] > 40:  # answered for the first call's size, and guarded
            return x.sum(0)
        return x.cos()

    compiled = minicompiler.compile(fn, dynamic=True)
    for rows in (32, 16, 64, 32):
        x = torch.randn(rows, 3)
        torch.testing.assert_close(compiled(x), fn(x))
    assert len(compiled.reports) == 2
    assert "size guard: s0 <= 40" in compiled.reports[0].dynamic
    assert compiled.reports[1].recompile_reason.startswith("size guard failed: s0 <= 40 (s0=64")


def test_python_that_needs_a_number_specializes_and_stays_correct() -> None:
    def fn(x):
        total = x[0]
        for i in range(1, x.shape[0]):  # range() needs an int: s0 is specialized (guarded)
            total = total + x[i]
        return total

    compiled = minicompiler.compile(fn, dynamic=True)
    for rows in (3, 3, 5):
        x = torch.randn(rows, 4)
        torch.testing.assert_close(compiled(x), fn(x))
    assert "size guard: s0 == 3" in compiled.reports[0].dynamic
    assert len(compiled.reports) == 2


def test_dynamic_none_makes_a_changed_dim_symbolic_on_the_recompile() -> None:
    compiled = minicompiler.compile(attention)
    for length in SEQUENCE_LENGTHS:
        x = torch.randn(2, length, 16)
        torch.testing.assert_close(compiled(x), attention(x), atol=1e-5, rtol=1e-5)
    first, second = compiled.reports  # the static first entry, then one symbolic entry for the rest
    assert first.dynamic == [] and "guard failed" in second.recompile_reason
    assert "s0 = x.shape[1] (a symbol in the graph)" in second.dynamic


def test_autocast_regions_compile_symbolic_sizes_too() -> None:
    model = DynamicShapeModel()
    compiled = minicompiler.compile(model, dynamic=True)
    for length in (12, 20, 28):
        x = torch.randn(2, length, 16)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got, expected = compiled(x), model(x)
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected, rtol=2e-2, atol=2e-2)
    assert len(compiled.reports) == 1 and compiled.report.graphs[0].variants  # the autocast variant, symbolic


@pytest.mark.parametrize("backend", BACKENDS)
def test_seed_003_transformer_serves_every_sequence_length_from_one_graph(backend: str) -> None:
    """Embeddings, torch.arange(seq_len), attention's transposes and reshapes: all in symbols."""
    torch.manual_seed(0)
    device = device_for(backend)
    model = MiniTransformer(vocab_size=100, d_model=32, num_heads=4, num_layers=1, d_ff=64).to(device).eval()
    compiled = minicompiler.compile(model, backend=backend, dynamic=True)
    for length in (8, 12, 20):
        ids = torch.randint(0, 100, (3, length), device=device)
        model.zero_grad()
        compiled(ids).square().sum().backward()
        got = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        expected = model(ids)
        expected.square().sum().backward()
        with torch.no_grad():
            torch.testing.assert_close(compiled(ids), expected, rtol=1e-4, atol=1e-4)
        for mine, eager in zip(got, [p.grad for p in model.parameters()], strict=True):
            torch.testing.assert_close(mine, eager, rtol=1e-3, atol=1e-4)
    assert len(compiled.reports) == 1, (compiled.symbolic_off, [r.recompile_reason for r in compiled.reports])
    assert not [line for line in compiled.report.dynamic if "==" in line]  # no size specialized
