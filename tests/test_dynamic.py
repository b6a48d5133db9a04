"""Dynamic shapes, guard side: dims whose size is not guarded, one entry for many sizes.

Where the graph cannot have symbolic sizes (tests/test_symbolic_sizes.py is the usual case), each
new size is captured again for its own sizes and compiled with shape-generic kernels, so the
kernels are shared; the report calls it dynamic, not a recompile."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import minicompiler

SEQUENCE_LENGTHS = (32, 64, 128, 256)  # seed 003's loop


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


def test_dynamic_true_serves_every_sequence_length_from_one_entry() -> None:
    torch.manual_seed(0)
    for fn in (DynamicShapeModel(), attention):
        compiled = minicompiler.compile(fn, dynamic=True)
        for length in SEQUENCE_LENGTHS:
            x = torch.randn(2, length, 16)
            torch.testing.assert_close(compiled(x), fn(x), atol=1e-5, rtol=1e-5)
            assert compiled.report.dynamic[0] == "dims 0, 1, 2 of x" and compiled.report.recompile_reason is None
        assert len(compiled.cache) == 1 and len(compiled.reports) == 1  # one symbolic graph
        assert any("dims 0, 1, 2 dynamic" in g.description for g in compiled.cache[0].guards)


def test_without_symbolic_sizes_each_size_is_captured_again_with_shared_kernels() -> None:
    def fn(x):
        return x.cos().sin()

    # autotuning (like CUDA graphs) is done for one set of sizes: no symbolic graph
    compiled = minicompiler.compile(fn, dynamic=True, mode="max-autotune-no-cudagraphs")
    for length in SEQUENCE_LENGTHS:
        x = torch.randn(2, length)
        torch.testing.assert_close(compiled(x), torch.sin(torch.cos(x)))
    assert len(compiled.cache) == 1 and len(compiled.reports) == len(SEQUENCE_LENGTHS)
    assert all(r.recompile_reason is None for r in compiled.reports)
    sources = {r.graphs[0].kernels[0].code for r in compiled.reports}
    assert len(sources) == 1  # shape-generic: the same kernel text for every size


def test_dynamic_none_marks_a_changed_dim_on_the_recompile() -> None:
    compiled = minicompiler.compile(attention)
    for length in SEQUENCE_LENGTHS:
        x = torch.randn(2, length, 16)
        torch.testing.assert_close(compiled(x), attention(x), atol=1e-5, rtol=1e-5)
    first, second = compiled.reports
    assert first.dynamic == [] and "guard failed" in second.recompile_reason
    assert second.dynamic[0] == "dims 1 of x"
    assert len(compiled.cache) == 2  # the static first entry and the dynamic one


def test_dynamic_guards_still_check_rank_dtype_and_small_sizes() -> None:
    compiled = minicompiler.compile(attention, dynamic=True)
    compiled(torch.randn(2, 8, 4))
    for x in (torch.randn(2, 1, 4), torch.randn(2, 8, 4, dtype=torch.float64), torch.randn(8, 4)):
        torch.testing.assert_close(compiled(x), attention(x))
    assert len(compiled.cache) == 4  # each of these failed the dynamic entry's guard


def test_shape_dependent_python_is_captured_per_size() -> None:
    def fn(x):
        if x.shape[0] > 40:  # a different graph above 40 rows, under the same dynamic entry
            return x.sum(0)
        return x.cos()

    compiled = minicompiler.compile(fn, dynamic=True)
    for rows in (32, 64, 32):
        x = torch.randn(rows, 3)
        torch.testing.assert_close(compiled(x), fn(x))
    assert len(compiled.cache) == 1 and len(compiled.reports) == 2


def test_a_keyword_argument_given_by_position_later_recompiles() -> None:
    """f(x=t) then f(t2) of another size: the failed guard's kwargs['x'] is not there to learn a
    dynamic dim from (it raised KeyError from inside the runtime)."""
    compiled = minicompiler.compile(lambda x: x * 2)
    first = torch.tensor(1.0)
    torch.testing.assert_close(compiled(x=first), first * 2)
    second = torch.randn(3)
    torch.testing.assert_close(compiled(second), second * 2)
    assert len(compiled.reports) == 2
