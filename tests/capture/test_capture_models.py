"""Model code as people write it: configs, ModuleDicts, properties, embeddings, torch's own modules."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Config:
    n_embd: int = 16
    n_head: int = 4
    bias: bool = True


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention, reading its sizes from a config object."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.config = config

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        n_head = self.config.n_head
        q, k, v = self.c_attn(x).split(self.config.n_embd, dim=2)
        k = k.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
        v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


def test_nanogpt_attention_with_config_object(check) -> None:
    config = Config()
    result = check(CausalSelfAttention(config).eval(), lambda: (torch.randn(2, 8, 16),), atol=1e-5, rtol=1e-5)
    assert any(g.source == "self.config.n_head" for g in result.guards)
    # a dataclass config: guarded on its type; each field capture reads is guarded on its own
    assert any(g.kind == "type" and g.source == "self.config" for g in result.guards)


class Heads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs = {name: head(x) for name, head in self.heads.items()}
        return torch.cat([outs[k] for k in sorted(outs)], dim=-1) * self.scale


def test_module_dict_buffer_and_dict_comprehension(check) -> None:
    result = check(Heads(), lambda: (torch.randn(2, 4),))
    assert "self.scale" in [str(s) for s in result.input_sources]


class WithProperty(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    @property
    def weight_t(self) -> torch.Tensor:
        return self.lin.weight.t()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight_t


def test_property_is_inlined(check) -> None:
    result = check(WithProperty(), lambda: (torch.randn(2, 4),))
    assert [n.op for n in result.graph.compute_nodes()] == ["transpose", "matmul"]


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(10, 4)
        self.pos = nn.Parameter(torch.randn(8, 4))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        b, t = idx.shape
        return self.tok(idx) + self.pos[:t]


def test_embedding_and_integer_inputs(check) -> None:
    check(Embed(), lambda: (torch.randint(0, 10, (2, 5)),))


def test_torch_modules_inlined_through_their_forward(check) -> None:
    model = nn.Sequential(nn.Conv1d(4, 4, 3), nn.BatchNorm1d(4), nn.GELU(approximate="tanh"), nn.AvgPool1d(2))
    check(model.eval(), lambda: (torch.randn(2, 4, 9),), atol=1e-5, rtol=1e-5)
    check(nn.GroupNorm(2, 4), lambda: (torch.randn(2, 4, 3),), atol=1e-5, rtol=1e-5)


def test_metadata_queries_and_multi_output_functions(check) -> None:
    def fn(x):
        var, mean = torch.var_mean(x, dim=0)
        kind = torch.result_type(x, 1.0)
        return (x - mean) / (var + 1e-5).sqrt(), torch.std_mean(x)[1], kind

    check(fn, lambda: (torch.randn(5, 3),))


def test_training_mode_dropout_is_an_extern_call() -> None:
    from minicompiler.capture import capture

    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).train()
    result = capture(model, (torch.randn(2, 4),), {})
    ops = [(n.op, n.args[0]) for n in result.graph.compute_nodes() if n.op == "torch_call"]
    assert ops == [("torch_call", F.dropout)]
