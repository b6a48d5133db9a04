"""The seeds' workloads, one factory each: `make(device) -> (fn, args)`.

Used by the benchmark, the demo, the notebooks and the tests, so every experiment in the seed
documents runs through the same code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True)
class Workload:
    name: str
    seed: str  # which seed document it comes from
    make: Callable[[str], tuple[Callable, tuple[Any, ...]]]


def double_cosine(x: torch.Tensor) -> torch.Tensor:
    """Seed 004: cos(cos(x)), the classic two-kernels-become-one example."""
    return torch.cos(torch.cos(x))


def sin_plus_cos(x: torch.Tensor) -> torch.Tensor:
    """Seed 001's `sin_func`."""
    return torch.sin(x) + torch.cos(x)


class SimpleModel(nn.Module):
    """Seed 000's MLP: 1024 -> 1024 -> 1024 -> 10 with ReLUs."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class BiasGeluLayerNorm(nn.Module):
    """A transformer feed-forward tail: bias + GELU + LayerNorm (three ops eager, one kernel fused)."""

    def __init__(self, d_model: int = 1024) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(d_model) * 0.1)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.nn.functional.gelu(x + self.bias))


def scaled_softmax(x: torch.Tensor) -> torch.Tensor:
    """Attention-style softmax of scaled scores: (B*H, T, T) -> same."""
    return torch.softmax(x * 0.125, dim=-1)


def numpy_fn(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Seed 001's `numpy_fn`, as the seed writes it."""
    # Step 1: Normalize the input arrays to have zero mean and unit variance
    X_mean, X_std = X.mean(axis=0), X.std(axis=0)
    Y_mean, Y_std = Y.mean(axis=0), Y.std(axis=0)

    # Avoid division by zero in case of zero standard deviation
    X_std[X_std == 0] = 1
    Y_std[Y_std == 0] = 1

    X_normalized = (X - X_mean) / X_std
    Y_normalized = (Y - Y_mean) / Y_std

    # Step 2: Perform the tensor product followed by sum over last two dimensions
    intermediate_result = np.sum(X_normalized[:, :, None] * Y_normalized[:, None, :], axis=(-2, -1))

    # Step 3: Apply thresholding to clip values outside of [-1, 1]
    intermediate_result = np.clip(intermediate_result, -1, 1)

    # Step 4: Apply exponential function for non-linearity
    result = np.exp(intermediate_result)

    # Step 5: Add a small regularization term to avoid overfitting
    regularization_term = 0.001 * np.sum(X_normalized**2 + Y_normalized**2, axis=1)
    result += regularization_term

    return result


def _eval(module: nn.Module, device: str) -> nn.Module:
    return module.to(device).eval()


WORKLOADS: list[Workload] = [
    Workload("cos(cos(x)) 4M", "004", lambda d: (double_cosine, (torch.randn(1 << 22, device=d),))),
    Workload("sin(x)+cos(x) 4M", "001", lambda d: (sin_plus_cos, (torch.randn(1 << 22, device=d),))),
    Workload("sin(x)+cos(x) 0-d int", "001", lambda d: (sin_plus_cos, (torch.tensor(1, device=d),))),
    Workload("MLP 1024x1024", "000", lambda d: (_eval(SimpleModel(), d), (torch.randn(1024, 1024, device=d),))),
    Workload(
        "bias+GELU+LayerNorm 4096x1024", "003",
        lambda d: (_eval(BiasGeluLayerNorm(), d), (torch.randn(4096, 1024, device=d),)),
    ),
    Workload("scaled softmax 64x512x512", "003", lambda d: (scaled_softmax, (torch.randn(64, 512, 512, device=d),))),
]


def by_name(name: str) -> Workload:
    for workload in WORKLOADS:
        if workload.name == name:
            return workload
    raise KeyError(f"no workload {name!r}; have {[w.name for w in WORKLOADS]}")
