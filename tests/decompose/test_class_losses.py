"""Losses that read each sample's score at its target class (capture/torch_class_losses.py):
nll_loss, cross_entropy, multi_margin_loss, multilabel_margin_loss, vs eager on fresh random
scores and targets (ignored targets, class weights, label smoothing, class probabilities, every
reduction), generated kernels only; gradients in float64; a target out of range raises."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import minicompiler

from .conftest import assert_generated

BACKENDS = ["cpp"] + (["triton"] if os.environ.get("TRITON_INTERPRET") == "1" else [])
N, C = 6, 5
WEIGHTS = torch.rand(C, generator=torch.Generator().manual_seed(0), dtype=torch.float64) + 0.5  # per class


def _targets(*shape: int) -> torch.Tensor:
    target = torch.randint(0, C, shape)
    target.view(-1)[0] = -100  # one ignored sample (ignore_index's default)
    return target


def _labels() -> torch.Tensor:
    # each sample's classes, up to the first -1 (later slots are not read)
    labels = torch.randint(0, C, (N, C))
    labels[torch.arange(N), torch.randint(0, C, (N,))] = -1
    return labels


# name -> (loss function of scores and target, scores' shape, target maker)
CASES: dict[str, tuple[Callable[..., Any], tuple[int, ...], Callable[[], torch.Tensor]]] = {
    "nll_loss": (F.nll_loss, (N, C), lambda: _targets(N)),
    "nll_loss_sum_weighted": (lambda x, t: F.nll_loss(x, t, WEIGHTS.to(x.dtype), reduction="sum"),
                              (N, C), lambda: _targets(N)),
    "nll_loss_none_2d": (lambda x, t: F.nll_loss(x, t, reduction="none"), (2, C, 3, 4), lambda: _targets(2, 3, 4)),
    "nll_loss_one_sample": (lambda x, t: F.nll_loss(x, t, ignore_index=1), (C,), lambda: torch.tensor(3)),
    "cross_entropy": (F.cross_entropy, (N, C), lambda: _targets(N)),
    "cross_entropy_smoothing": (lambda x, t: F.cross_entropy(x, t, WEIGHTS.to(x.dtype), label_smoothing=0.2),
                                (N, C), lambda: _targets(N)),
    "cross_entropy_smoothing_none": (lambda x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.1),
                                     (N, C, 2), lambda: _targets(N, 2)),
    "cross_entropy_probabilities": (lambda x, t: F.cross_entropy(x, t.softmax(1), label_smoothing=0.3),
                                    (N, C), lambda: torch.randn(N, C)),
    "multi_margin_loss": (F.multi_margin_loss, (N, C), lambda: torch.randint(0, C, (N,))),
    "multi_margin_loss_p2": (lambda x, t: F.multi_margin_loss(x, t, p=2, margin=0.5,
                                                              weight=WEIGHTS.to(x.dtype), reduction="none"),
                             (N, C), lambda: torch.randint(0, C, (N,))),
    "multilabel_margin_loss": (F.multilabel_margin_loss, (N, C), _labels),
    "multilabel_margin_loss_one": (lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"), (C,),
                                   lambda: _labels()[0]),
}


def _arguments(name: str, dtype: torch.dtype) -> list[torch.Tensor]:
    fn, shape, target = CASES[name]
    made = target()
    return [torch.randn(shape, dtype=dtype), made.to(dtype) if made.is_floating_point() else made]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_class_loss_matches_eager(name: str, dtype: torch.dtype, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fn, args = CASES[name][0], _arguments(name, dtype)
    # the per-class weights where the scores are (tests/triton_on_gpu.py makes them on the GPU)
    monkeypatch.setitem(globals(), "WEIGHTS", WEIGHTS.to(args[0].device))
    compiled = minicompiler.compile(lambda *a: fn(*a), backend=backend)
    torch.testing.assert_close(compiled(*args), fn(*args))
    assert_generated(compiled)


@pytest.mark.parametrize("name", sorted(CASES))
def test_class_loss_gradient(name: str) -> None:
    fn = CASES[name][0]
    scores, target = _arguments(name, torch.float64)
    scores.requires_grad_()
    (expected,) = torch.autograd.grad(fn(scores, target).sum(), scores)
    compiled = minicompiler.compile(lambda *a: fn(*a), backend="cpp")
    (actual,) = torch.autograd.grad(compiled(scores, target).sum(), scores)
    torch.testing.assert_close(actual, expected)


def test_target_out_of_range_raises() -> None:
    compiled = minicompiler.compile(F.cross_entropy, backend="cpp")
    scores, target = torch.randn(N, C), torch.randint(0, C, (N,))
    torch.testing.assert_close(compiled(scores, target), F.cross_entropy(scores, target))
    target[2] = C
    with pytest.raises(IndexError, match="out of bounds"):
        compiled(scores, target)
