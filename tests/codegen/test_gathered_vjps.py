"""The backward of a call the compiler does not know (a `torch_call`) asks torch autograd for each
input's gradient; an attention call has three (q, k and v). The wrapper gathers them into one
call: `recorded_vjps(...)`, which differentiates what the forward recorded once (the backward runs
no attention forward), or, where the call is recomputed in the backward (a checkpointed region),
`torch_call_vjps(...)`: recomputed once and differentiated once, not three times each (counted on
the aten ops the backward dispatches). The gradients equal eager's."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import minicompiler


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q.sin(), k, v * 2).cos()


def backward_ops(compiled, dispatched_ops: type, checkpointed: bool = False) -> tuple[list[str], str, str]:  # noqa: ANN001
    """Run the compiled attention's backward: (the attention ops it dispatched, its code, its notes)."""
    q, k, v = (torch.randn(2, 4, 16, 8, requires_grad=True) for _ in range(3))
    eager = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = compiled(q, k, v)
    expected = attention(*eager)
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(out)
    with dispatched_ops() as ops:
        out.backward(grad)
    expected.backward(grad)
    for got, want in zip((q, k, v), eager, strict=True):
        torch.testing.assert_close(got.grad, want.grad)
    stage = next(s for g in compiled.report.graphs for s in g.stages if s.name == "codegen (backward)")
    return [name for name in ops.names if "attention" in name], stage.text, " ".join(stage.notes)


def test_one_backward_for_all_inputs_from_the_forwards_recording(dispatched_ops: type) -> None:
    torch.manual_seed(0)
    attention_ops, backward, notes = backward_ops(minicompiler.compile(attention, backend="cpp"), dispatched_ops)
    assert [n for n in attention_ops if "backward" not in n] == [], attention_ops  # not run again
    assert len([n for n in attention_ops if "backward" in n]) == 1, attention_ops  # differentiated once
    assert backward.count("recorded_vjps(") == 1 and "(0, 1, 2)" in backward
    assert "gathered: recorded_vjps for 1 call (all its gradients" in notes, notes


def test_one_recomputation_and_one_backward_for_all_inputs_of_a_checkpointed_call(dispatched_ops: type) -> None:
    torch.manual_seed(0)

    def checkpointed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(attention, q, k, v, use_reentrant=False)

    attention_ops, backward, notes = backward_ops(minicompiler.compile(checkpointed, backend="cpp"), dispatched_ops)
    assert len([n for n in attention_ops if "backward" not in n]) == 1, attention_ops  # recomputed once
    assert len([n for n in attention_ops if "backward" in n]) == 1, attention_ops  # differentiated once
    assert backward.count("torch_call_vjps(") == 1 and "(0, 1, 2)" in backward
    assert "gathered: torch_call_vjps for 1 call (all its gradients" in notes, notes


def test_a_single_gradient_keeps_its_own_call() -> None:
    """Only k needs a gradient: one recorded_vjp, nothing to gather."""
    compiled = minicompiler.compile(attention, backend="cpp")
    q, v = torch.randn(2, 4, 16, 8), torch.randn(2, 4, 16, 8)
    k = torch.randn(2, 4, 16, 8, requires_grad=True)
    k_eager = k.detach().clone().requires_grad_()
    compiled(q, k, v).sum().backward()
    attention(q, k_eager, v).sum().backward()
    torch.testing.assert_close(k.grad, k_eager.grad)
    backward = next(s.text for g in compiled.report.graphs for s in g.stages if s.name == "codegen (backward)")
    assert "recorded_vjps(" not in backward and "recorded_vjp(" in backward
