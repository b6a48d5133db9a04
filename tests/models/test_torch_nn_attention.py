"""torch.nn's attention modules, as learners write them: nn.MultiheadAttention,
nn.TransformerEncoderLayer and nn.TransformerEncoder, captured whole (their general path:
projections and scaled_dot_product_attention, read from torch's own Python) and compared with
eager: outputs, attention weights, and in a training step every gradient. In inference eager takes
torch's fused fast path, which computes the same; only nn.TransformerEncoder given a padding mask
does something else there (a nested tensor, zeros at the padded positions): capture meets the
packing as eager does, and from there the call runs eagerly."""

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


def encoder(batch_first: bool, need_weights: bool, masks: bool) -> tuple[nn.Module, tuple, dict]:
    layer, args, kwargs = encoder_layer(batch_first, need_weights, masks)
    return nn.TransformerEncoder(layer, 2), args, kwargs


@pytest.mark.parametrize("build", [attention, encoder_layer, encoder])
@pytest.mark.parametrize("masks", [False, True])
def test_inference_matches_eager(build, masks: bool) -> None:  # noqa: ANN001
    torch.manual_seed(0)
    module, args, kwargs = build(True, False, masks)
    module.eval()
    if build is not attention:
        kwargs.pop("need_weights", None)
    with torch.no_grad():
        explained = minicompiler.explain(module)(*args, **kwargs)
        compiled = minicompiler.compile(module)
        torch.testing.assert_close(first_tensor(compiled(*args, **kwargs)), first_tensor(module(*args, **kwargs)))
    nested = build is encoder and masks  # eager packs the padded batch: from there the call runs eagerly
    assert (explained.graph_break_count > 0) == nested, explained.to_text()
    if nested:
        assert "_nested_tensor_from_mask" in explained.to_text()


def test_an_encoder_with_a_padding_mask_trains_as_one_graph() -> None:
    torch.manual_seed(0)
    module, args, kwargs = encoder(True, False, True)
    explained = minicompiler.explain(module.train())(*args, **kwargs)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.to_text()
