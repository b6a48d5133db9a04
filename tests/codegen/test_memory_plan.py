"""Memory planning (codegen/memory_plan.py): a kernel's output takes the memory of a dead buffer of
the same sizes, strides, dtype and device, never of one that something may still read: a view of
it, an extern's result that may be a view of it, an output, a buffer a cache knows by identity.
The planner is checked on small hand-written wrappers (what may and may not be reused), and on
compiled programs against eager (the reuse is real, and results are right)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import minicompiler
from minicompiler.codegen.memory_plan import plan_memory


def buffer(name: str, dtype: str = "torch.float32", sizes: str = "(4,), (1,)") -> str:
    return f"    {name} = torch.empty_strided({sizes}, dtype={dtype}, device='cpu')"


def plan(blocks: list[list[str]], kept: frozenset[str] = frozenset(), fresh: frozenset[str] = frozenset(),
         pinned: frozenset[str] = frozenset()) -> list[str]:
    names = {name for block in blocks for line in block if " = " in line
             for name in line.split(" = ")[0].strip().split(", ")}
    return plan_memory(blocks, names, set(kept), set(fresh), set(pinned)).lines


def reused_by(lines: list[str]) -> dict[str, str]:
    """new buffer -> the buffer whose memory it took."""
    return {line.split(" = ")[0].strip(): line.split(" = ")[1].split()[0] for line in lines if "# reuses" in line}


def gpu_buffer(name: str) -> str:  # a GPU graph's allocation (runtime/allocation.py)
    return f"    {name} = empty_strided_cuda((4,), (1,), torch.float32)"


@pytest.mark.parametrize("buffer", [buffer, gpu_buffer])
def test_a_dead_buffer_of_the_same_spec_is_reused_and_deleted_there(buffer) -> None:
    lines = plan([[buffer("a"), "    k1(a)"], [buffer("b"), "    k2(a, b)"], [buffer("c"), "    k3(b, c)"]],
                 kept=frozenset({"c"}))
    assert reused_by(lines) == {"c": "a"}
    assert lines.index("    del a") == lines.index(next(line for line in lines if line.startswith("    c = a"))) + 1
    assert sum(line.startswith("    del") and "a" in line.split("del ")[1].split(", ") for line in lines) == 1


def test_a_view_keeps_the_memory_alive_until_it_is_dead() -> None:
    blocks = [[buffer("a"), "    k1(a)"], ["    v = reinterpret_tensor(a, (2,), (1,), 0)"],
              [buffer("b"), "    k2(v, b)"], [buffer("c"), "    k3(b, c)"]]
    assert reused_by(plan(blocks, kept=frozenset({"c"}))) == {"c": "a"}  # not b: v still reads a's memory there


def test_an_extern_result_may_be_a_view_of_its_argument_unless_known_new() -> None:
    blocks = [[buffer("a"), "    k1(a)"], ["    e = const_0(a)"], [buffer("b"), "    k2(e, b)"],
              [buffer("c"), "    k3(b, c)"]]
    assert reused_by(plan(blocks, kept=frozenset({"c"}))) == {"c": "a"}
    assert reused_by(plan(blocks, kept=frozenset({"c"}), fresh=frozenset({"e"}))) == {"b": "a"}


def test_outputs_pinned_buffers_other_specs_and_per_kernel_sizes_are_not_reused() -> None:
    blocks = [[buffer("a"), "    k1(a)"], [buffer("b"), "    k2(a, b)"], [buffer("c"), "    k3(b, c)"]]
    assert reused_by(plan(blocks, kept=frozenset({"a", "c"}))) == {}
    assert reused_by(plan(blocks, kept=frozenset({"c"}), pinned=frozenset({"a"}))) == {}
    other_dtype = [[buffer("a", "torch.float16"), "    k1(a)"], [buffer("b"), "    k2(a, b)"],
                   [buffer("c"), "    k3(b, c)"]]
    assert reused_by(plan(other_dtype, kept=frozenset({"c"}))) == {}
    per_kernel = [[buffer("a", sizes="(size0,), (1,)"), "    k1(a)"], [buffer("b"), "    k2(a, b)"],
                  [buffer("c", sizes="(size0,), (1,)"), "    k3(b, c)"]]
    assert reused_by(plan(per_kernel, kept=frozenset({"c"}))) == {}


def test_written_in_place_names_share_the_memory() -> None:
    blocks = [[buffer("a"), "    k1(a)"], ["    w = a  # written in place", "    k2(w)"],
              [buffer("b"), "    k3(w, b)"], [buffer("c"), "    k4(b, c)"]]
    assert reused_by(plan(blocks, kept=frozenset({"c"}))) == {"c": "a"}


def wrappers(compiled) -> list[str]:
    return [stage.text.split("# ---- wrapper ----")[-1] for g in compiled.report.graphs for stage in g.stages
            if stage.name.startswith("codegen")]


def test_training_reuses_memory_and_matches_eager() -> None:
    """An MLP's forward and backward reuse buffers (the note in the report counts them), and the
    output and every gradient still equal eager's, call after call."""
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64))])
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model)
    for _ in range(3):
        x = torch.randn(16, 64)
        for run in (compiled, reference):
            run.zero_grad()
            run(x).square().mean().backward()
        for got, expected in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(got.grad, expected.grad)
    texts = wrappers(compiled)
    assert sum(text.count("# reuses") for text in texts) >= 4, texts
    notes = [note for g in compiled.report.graphs for stage in g.stages if stage.name.startswith("codegen")
             for note in stage.notes if note.startswith("memory plan")]
    assert notes, compiled.report.graphs[0].stages


def test_a_returned_view_of_an_intermediate_is_never_overwritten() -> None:
    """The intermediate `t` dies inside the program but its view `t[0]` is returned: its memory
    must not take a later buffer's value."""
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = (x * 2).sin()
        row = t.reshape(4, 8)[0]
        u = (x + 1).cos().sum() * x.exp()
        return row, (u * 3).tanh()

    compiled = minicompiler.compile(fn)
    x = torch.randn(32)
    for got, expected in zip(compiled(x), fn(x), strict=True):
        torch.testing.assert_close(got, expected)


def test_names_unpacked_from_one_call_may_share_its_arguments_memory() -> None:
    """`g1, g2 = torch_call_vjps(fn, (0, 1), a, ...)`: torch autograd may hand back `a` itself."""
    blocks = [[buffer("a"), "    k1(a)"], ["    g1, g2 = torch_call_vjps(const_0, (0, 1), a)"],
              [buffer("b"), "    k2(g2, b)"], [buffer("c"), "    k3(b, c)"]]
    assert reused_by(plan(blocks, kept=frozenset({"c", "g1"}))) == {}  # g1 lives on: a's memory with it
    assert reused_by(plan(blocks, kept=frozenset({"c"}))) == {"c": "a"}
