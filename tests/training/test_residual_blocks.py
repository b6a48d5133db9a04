"""Residual blocks in timm's form (in-place `x += shortcut`, in-place ReLU, the last block
downsampling) whose second batch norms start at weight 0 (timm's zero_init_last): the block adds 0
to its input, so the last ReLU sees the exact zeros of the previous one. The H100 bench's timm
resnet50 training step was wrong here (rel. error 1.26): relu, written as maximum(x, 0), passed
the gradient at 0 where torch's relu gives 0 (see tests/autograd/test_gradients_at_kinks.py)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import minicompiler

# Triton on CPU tensors runs in the interpreter (TRITON_INTERPRET=1, as make test sets)
ON_GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.act1, self.act2 = nn.ReLU(inplace=True), nn.ReLU(inplace=True)
        nn.init.zeros_(self.bn2.weight)  # timm's zero_init_last
        self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                           if stride != 1 or cin != cout else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.bn2(self.conv2(self.act1(self.bn1(self.conv1(x)))))
        if self.downsample is not None:
            shortcut = self.downsample(shortcut)
        x += shortcut
        return self.act2(x)


@pytest.mark.parametrize(("backend", "device"), [("cpp", "cpu"), ("triton", "cpu"),
                                                 pytest.param("triton", "cuda", marks=ON_GPU)])
def test_zero_initialised_residual_blocks_train_like_eager(backend: str, device: str) -> None:
    torch.manual_seed(0)
    eager = nn.Sequential(Block(8, 8, 1), Block(8, 8, 1), Block(8, 16, 2)).double().to(device)
    model = copy.deepcopy(eager)
    compiled = minicompiler.compile(model, backend=backend)
    x = torch.randn(2, 8, 8, 8, dtype=torch.float64, device=device)
    eager(x).pow(2).mean().backward()
    compiled(x).pow(2).mean().backward()
    for (name, expected), got in zip(eager.named_parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(got.grad, expected.grad, msg=name)


@pytest.mark.parametrize(("backend", "device"), [("cpp", "cpu"), ("triton", "cpu"),
                                                 pytest.param("triton", "cuda", marks=ON_GPU)])
def test_equal_gradients_are_distinct_tensors_autograd_keeps(backend: str, device: str) -> None:
    """A downsampling block's two last batch norms get one incoming gradient, so their biases'
    gradients are one sum: each parameter gets its own tensor, computed by the kernel computing
    the sum, and `.grad` is the very tensor the backward returned (AccumulateGrad copies a tensor
    that something else holds: a torch kernel at every step)."""
    torch.manual_seed(0)
    eager = Block(4, 8, 2).double().to(device)  # float64: no TF32 in cuDNN's convolutions
    model = copy.deepcopy(eager)
    compiled = minicompiler.compile(model, backend=backend)
    x = torch.randn(2, 4, 8, 8, dtype=torch.float64, device=device)
    returned: dict[str, int] = {}
    for name, parameter in model.named_parameters():
        parameter.register_hook(lambda grad, name=name: returned.__setitem__(name, grad.data_ptr()))
    eager(x).pow(2).mean().backward()
    compiled(x).pow(2).mean().backward()
    bn2_bias, downsample_bias = model.bn2.bias.grad, model.downsample[1].bias.grad
    torch.testing.assert_close(bn2_bias, downsample_bias)  # the two are equal: the case this is about
    assert bn2_bias.data_ptr() != downsample_bias.data_ptr()
    for (name, expected), got in zip(eager.named_parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(got.grad, expected.grad, msg=name)
        assert got.grad.data_ptr() == returned[name], f"{name}'s gradient was copied by AccumulateGrad"
    backward_notes = [note for graph in compiled.reports[-1].graphs for stage in graph.stages
                      if stage.name == "autograd" for note in stage.notes]
    assert any("also another input's gradient" in note for note in backward_notes)
