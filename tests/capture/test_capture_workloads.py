"""The seed workloads: capture, then the graph must match eager on fresh inputs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def ops_of(result) -> list[str]:
    return [n.op for n in result.graph.compute_nodes()]


def test_cos_cos(check) -> None:
    result = check(lambda x: torch.cos(torch.cos(x)), lambda: (torch.randn(1024),))
    assert ops_of(result) == ["cos", "cos"]


def test_sin_plus_cos(check) -> None:
    result = check(lambda x: torch.sin(x) + torch.cos(x), lambda: (torch.randn(1024),))
    assert ops_of(result) == ["sin", "cos", "add"]


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def test_mlp(check) -> None:
    model = MLP().eval()
    result = check(model, lambda: (torch.randn(8, 1024),), atol=1e-4, rtol=1e-4)
    assert ops_of(result) == ["linear", "relu", "linear", "relu", "linear"]
    assert [str(s) for s in result.input_sources] == [
        "args[0]", "self.layers.0.weight", "self.layers.0.bias", "self.layers.2.weight",
        "self.layers.2.bias", "self.layers.4.weight", "self.layers.4.bias",
    ]


def test_parameters_are_reread_each_call(check) -> None:
    model = MLP().eval()
    x = torch.randn(2, 1024)
    result = check(model, lambda: (x,), atol=1e-4, rtol=1e-4)
    with torch.no_grad():
        model.layers[4].bias.add_(1.0)  # what an optimizer step does
    assert all(g.check((x,), {}) for g in result.guards)
    from minicompiler.ir import run_graph

    torch.testing.assert_close(run_graph(result.graph, *result.fetch_inputs((x,), {})), model(x),
                               atol=1e-4, rtol=1e-4)


class BiasGeluNorm(nn.Module):
    def __init__(self, width: int = 256) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(width))
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(F.gelu(x + self.bias, approximate="tanh"))


def test_bias_gelu_layernorm(check) -> None:
    result = check(BiasGeluNorm(), lambda: (torch.randn(4, 256),), atol=1e-5, rtol=1e-5)
    assert ops_of(result) == ["add", "gelu", "layer_norm"]
    gelu = result.graph.compute_nodes()[1]
    assert gelu.kwargs == {"approximate": "tanh"}
    norm = result.graph.compute_nodes()[2]
    assert norm.args[1] == (256,) and norm.args[4] == 1e-5


def test_scaled_softmax(check) -> None:
    scale = 0.125

    def scaled_softmax(x):
        return torch.softmax(x * scale, dim=-1)

    result = check(scaled_softmax, lambda: (torch.randn(4, 64, 64),))
    assert ops_of(result) == ["mul", "softmax"]
    assert result.graph.compute_nodes()[1].args[1] == 2  # dim made non-negative


class Attention(nn.Module):
    """A small multi-head self-attention block, nanoGPT style."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.heads = heads
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
        mask = torch.ones(T, T, device=x.device).tril().view(1, 1, T, T)
        att = att.masked_fill(mask == 0, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


def test_attention_block(check) -> None:
    result = check(Attention().eval(), lambda: (torch.randn(2, 8, 32),), atol=1e-5, rtol=1e-5)
    assert "softmax" in ops_of(result) and "matmul" in ops_of(result)


class Block(nn.Module):
    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    def __init__(self, depth: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(depth)])
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        for block in self.blocks:
            x = block(x)
        return {"logits": self.head(x), "depth": len(self.blocks)}


def test_transformer_with_module_list_loop(check) -> None:
    result = check(Transformer().eval(), lambda: (torch.randn(2, 8, 32),), atol=1e-5, rtol=1e-5)
    assert result.graph.outputs["depth"] == 2
    assert ops_of(result).count("layer_norm") == 4


class ConvNet(nn.Module):
    """Built-in modules missing from the table (Conv2d, BatchNorm2d) are inlined."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU(inplace=True)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.bn(self.conv(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def test_convnet_inlines_builtin_forwards(check) -> None:
    result = check(ConvNet().eval(), lambda: (torch.randn(2, 3, 8, 8),), atol=1e-5, rtol=1e-5)
    assert "torch_call" in ops_of(result) and "relu" in ops_of(result)
