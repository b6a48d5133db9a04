"""minicompiler/bench/resnet.py: ResNet-18 without torchvision. Its output shape, compiled against eager
(inference in eval mode; gradients in train mode), and, where torchvision imports, the same
parameter and buffer names and shapes as torchvision's resnet18 (so its weights would load)."""

from __future__ import annotations

import copy

import pytest
import torch

import minicompiler
from minicompiler.bench.resnet import BasicBlock, resnet18


def test_output_shape_and_block_count() -> None:
    torch.manual_seed(0)
    model = resnet18(num_classes=10).eval()
    with torch.no_grad():
        assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert sum(isinstance(m, BasicBlock) for m in model.modules()) == 8  # 2 per stage: 2 + 2 + 2 + 2
    assert sum(p.numel() for p in resnet18().parameters()) == 11_689_512  # torchvision's resnet18


def test_compiled_matches_eager_in_eval() -> None:
    torch.manual_seed(0)
    model = resnet18(num_classes=10).eval()
    compiled = minicompiler.compile(model)
    with torch.no_grad():
        for _ in range(2):  # fresh inputs: the second call runs the compiled program again
            x = torch.randn(2, 3, 32, 32)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert len(compiled.reports) == 1 and not compiled.report.graph_breaks
    assert compiled.report.graphs[0].kernels


def test_compiled_gradients_match_eager_in_train() -> None:
    torch.manual_seed(0)
    eager = resnet18(num_classes=10).train()
    twin = copy.deepcopy(eager)  # its own BatchNorm running statistics, updated by the compiled step
    compiled = minicompiler.compile(twin)
    x = torch.randn(4, 3, 32, 32)
    compiled(x).square().mean().backward()
    eager(x).square().mean().backward()
    # Twenty layers of float32 rounding, BatchNorm's batch statistics over few values: eager itself is
    # ~1e-4 (relative) away from a float64 run, so gradients are compared as whole tensors, not per element.
    for (name, p_eager), p_compiled in zip(eager.named_parameters(), twin.parameters(), strict=True):
        relative = (p_compiled.grad - p_eager.grad).norm() / p_eager.grad.norm()
        assert relative < 1e-3, f"{name}: gradient off by {relative:.1e} (relative)"
    for (name, b_eager), b_compiled in zip(eager.named_buffers(), twin.buffers(), strict=True):
        torch.testing.assert_close(b_compiled, b_eager, rtol=1e-4, atol=1e-5, msg=name)  # running statistics


def test_state_dict_matches_torchvision() -> None:
    try:
        from torchvision.models import resnet18 as torchvision_resnet18
    except Exception as error:  # noqa: BLE001 - missing, or a wheel built for another torch that fails on import
        pytest.skip(f"torchvision not importable here ({type(error).__name__}: {str(error)[:120]})")
    ours, theirs = resnet18().state_dict(), torchvision_resnet18(weights=None).state_dict()
    assert list(ours) == list(theirs)
    assert {k: v.shape for k, v in ours.items()} == {k: v.shape for k, v in theirs.items()}
    resnet18().load_state_dict(theirs)  # strict: every key present, every shape the same
