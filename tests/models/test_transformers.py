"""Hugging Face transformers models, built from small configs with random weights (nothing is
downloaded), compile whole: one graph, no break, outputs and gradients equal to eager."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import minicompiler

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install -e '.[hf]')")

BATCH, SEQ, VOCAB = 2, 12, 1000
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def bert() -> nn.Module:
    return transformers.BertModel(transformers.BertConfig(vocab_size=VOCAB, **SMALL, **NO_DROPOUT))


def vit() -> nn.Module:
    config = transformers.ViTConfig(image_size=16, patch_size=8, **SMALL, **NO_DROPOUT)
    return transformers.ViTModel(config)


def gpt2() -> nn.Module:  # a decoder: causal mask, and a DynamicCache made inside forward
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2Model(config)


def llama() -> nn.Module:  # rotary embeddings, grouped-query attention, RMSNorm
    config = transformers.LlamaConfig(vocab_size=VOCAB, num_key_value_heads=2, **SMALL)
    return transformers.LlamaModel(config)


def distilbert() -> nn.Module:
    config = transformers.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                           dropout=0.0, attention_dropout=0.0)
    return transformers.DistilBertModel(config)


def gemma() -> nn.Module:  # its tanh GELU is a functools.partial of F.gelu
    config = transformers.GemmaConfig(vocab_size=VOCAB, num_key_value_heads=2, head_dim=8, **SMALL)
    return transformers.GemmaModel(config)


def falcon() -> nn.Module:  # splits its fused QKV with list indices: `qkv[..., [-2], :]`
    config = transformers.FalconConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       hidden_dropout=0.0, attention_dropout=0.0)
    return transformers.FalconModel(config)


def swin() -> nn.Module:  # windows rolled and partitioned; a layer sets its own shift size in forward
    config = transformers.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                                     window_size=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                     drop_path_rate=0.0)
    return transformers.SwinModel(config)


MODELS: dict[str, tuple[Callable[[], nn.Module], str]] = {
    "bert": (bert, "tokens"),
    "vit": (vit, "pixels"),
    "gpt2": (gpt2, "tokens"),
    "llama": (llama, "tokens"),
    "distilbert": (distilbert, "tokens"),
    "gemma": (gemma, "tokens"),
    "falcon": (falcon, "tokens"),
    "swin": (swin, "pixels32"),
}


def inputs(kind: str, with_mask: bool) -> tuple[tuple, dict[str, Any]]:
    if kind.startswith("pixels"):
        side = int(kind.removeprefix("pixels") or 16)
        return (torch.randn(BATCH, 3, side, side),), {}
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ))
    if not with_mask:
        return (tokens,), {}
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[0, SEQ - 3:] = 0  # the first sequence is padded
    return (tokens,), {"attention_mask": mask}


def cases() -> list[Any]:
    # (transformers 4 builds a decoder's causal mask with torch.vmap inside a TorchFunctionMode when
    # it sees it is being compiled: captured by broadcasting, see capture/vmap.py)
    return [pytest.param(name, mask, id=f"{name}-{'mask' if mask else 'nomask'}")
            for name, (_, kind) in MODELS.items() for mask in (False, True) if kind == "tokens" or not mask]


def assert_whole(model: nn.Module, args: tuple, kwargs: dict) -> None:
    explained = minicompiler.explain(model)(*args, **kwargs)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.to_text()
    assert not explained.eager_fallbacks, explained.eager_fallbacks


@pytest.mark.parametrize("name, with_mask", cases())
def test_eval_forward_matches_eager(name: str, with_mask: bool) -> None:
    torch.manual_seed(0)
    build, kind = MODELS[name]
    model = build().eval()
    args, kwargs = inputs(kind, with_mask)
    assert_whole(model, args, kwargs)
    compiled = minicompiler.compile(model)
    for _ in range(2):  # the second call reuses the compiled program
        args, kwargs = inputs(kind, with_mask)
        with torch.no_grad():
            got, expected = compiled(*args, **kwargs), model(*args, **kwargs)
        assert type(got) is type(expected)
        torch.testing.assert_close(got.last_hidden_state, expected.last_hidden_state, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name, with_mask", cases())
def test_training_step_gradients_match_eager(name: str, with_mask: bool) -> None:
    torch.manual_seed(0)
    build, kind = MODELS[name]
    model = build().train()
    args, kwargs = inputs(kind, with_mask)
    assert_whole(model, args, kwargs)
    compiled = minicompiler.compile(model)

    def gradients(run: Callable[..., Any]) -> dict[str, torch.Tensor]:
        model.zero_grad()
        out = run(*args, **kwargs)
        loss = out.last_hidden_state.square().mean()
        if out.get("pooler_output") is not None:  # every parameter then has a gradient
            loss = loss + out.pooler_output.mean()
        loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    got, expected = gradients(compiled), gradients(model)
    # differentiated by minicompiler, not handed to torch autograd (BERT's mask comes by keyword)
    assert [g.fallback for r in compiled.reports for g in r.graphs] == [None], compiled.reports
    assert got.keys() == expected.keys()
    for name_ in expected:
        torch.testing.assert_close(got[name_], expected[name_], rtol=1e-4, atol=1e-5, msg=name_)
