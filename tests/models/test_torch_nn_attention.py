"""torch.nn's attention modules, as learners write them: nn.MultiheadAttention and
nn.TransformerEncoderLayer in a training step, captured whole (their general path: projections and
scaled_dot_product_attention, read from torch's own Python) and compared with eager: outputs and
every gradient. In eval under no_grad they take torch's fused fast path, one call that returns
several tensors: a graph break there, and still eager's result."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import minicompiler


def attention(batch_first: bool, need_weights: bool, masks: bool) -> tuple[nn.Module, tuple, dict]:
    mha = nn.MultiheadAttention(32, 4, batch_first=batch_first)
    x = torch.randn(2, 10, 32) if batch_first else torch.randn(10, 2, 32)
    kwargs: dict = {"need_weights": need_weights}
    if masks:
        kwargs["key_padding_mask"] = torch.tensor([[False] * 10, [False] * 7 + [True] * 3])
        kwargs["attn_mask"] = torch.triu(torch.ones(10, 10, dtype=torch.bool), diagonal=1)
    return mha, (x, x, x), kwargs


def encoder_layer(batch_first: bool, need_weights: bool, masks: bool) -> tuple[nn.Module, tuple, dict]:
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=batch_first)
    x = torch.randn(2, 10, 32) if batch_first else torch.randn(10, 2, 32)
    kwargs = {"src_key_padding_mask": torch.tensor([[False] * 10, [False] * 7 + [True] * 3])} if masks else {}
    return layer, (x,), kwargs


def first_tensor(output: torch.Tensor | tuple) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


@pytest.mark.parametrize("build", [attention, encoder_layer])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("masks", [False, True])
def test_a_training_step_matches_eager(build, batch_first: bool, need_weights: bool, masks: bool) -> None:  # noqa: ANN001
    torch.manual_seed(0)
    module, args, kwargs = build(batch_first, need_weights, masks)
    module.train()
    if build is encoder_layer:
        kwargs.pop("need_weights", None)
    explained = minicompiler.explain(module)(*args, **kwargs)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.to_text()
    reference = copy.deepcopy(module)
    compiled = minicompiler.compile(module)
    got, expected = compiled(*args, **kwargs), reference(*args, **kwargs)
    if isinstance(expected, tuple) and expected[1] is not None:  # the attention weights
        torch.testing.assert_close(got[1], expected[1])
    torch.testing.assert_close(first_tensor(got), first_tensor(expected))
    grad = torch.randn_like(first_tensor(expected))
    first_tensor(got).backward(grad)
    first_tensor(expected).backward(grad)
    for (name, p), q in zip(module.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
    assert [g.fallback for r in compiled.reports for g in r.graphs] == [None]


@pytest.mark.parametrize("build", [attention, encoder_layer])
def test_eval_without_grad_matches_eager(build) -> None:  # noqa: ANN001
    torch.manual_seed(0)
    module, args, kwargs = build(True, False, True)
    module.eval()
    if build is encoder_layer:
        kwargs.pop("need_weights", None)
    compiled = minicompiler.compile(module)
    with torch.no_grad():
        torch.testing.assert_close(first_tensor(compiled(*args, **kwargs)), first_tensor(module(*args, **kwargs)))
