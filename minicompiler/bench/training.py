"""Seed 003's training experiment: `CompilationAwareTrainer`, eager vs compiled.

    python -m minicompiler.bench.training [--device cpu|cuda] [--epochs 8] [--json PATH]

The seed's CNN (Conv -> BatchNorm -> ReLU -> Conv -> BatchNorm -> ReLU -> Linear) trains with
Adam on 640 random 3x32x32 images in batches of 32, once per compiler: eager PyTorch,
minicompiler, and torch.compile (default and reduce-overhead). Every run starts from the same
weights and sees the batches in the same order, so their losses must agree. Epoch 1 includes
compiling (as the seed measures it); the steady state is the median of the later epochs (one
epoch is 20 steps, a few tens of milliseconds on a GPU: a single one is too noisy to compare).
The compilers take turns epoch by epoch, so the machine's noise falls on all of them alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from minicompiler.bench.__main__ import cold_caches, environment
from minicompiler.bench.models import SimpleModel


def compilers() -> dict[str, Callable[[nn.Module], Callable]]:
    import minicompiler

    return {
        "eager": lambda m: m,
        "minicompiler": lambda m: minicompiler.compile(m),
        "minicompiler reduce-overhead": lambda m: minicompiler.compile(m, mode="reduce-overhead"),
        "torch.compile default": lambda m: torch.compile(m),
        "torch.compile reduce-overhead": lambda m: torch.compile(m, mode="reduce-overhead"),
    }


class CompilationAwareTrainer:
    """The seed's trainer, with the compiler a parameter."""

    def __init__(self, model: nn.Module, compiler: Callable[[nn.Module], Callable], device: str) -> None:
        self.device = device
        self.module = model.to(device)
        self.model = compiler(self.module)

    def train_epoch(self, loader: DataLoader, optimizer: torch.optim.Optimizer) -> tuple[float, list[float]]:
        """(seconds, loss per batch)."""
        self.module.train()
        losses = []
        start = time.perf_counter()
        for data, target in loader:
            data, target = data.to(self.device), target.to(self.device)
            optimizer.zero_grad()
            loss = F.cross_entropy(self.model(data), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())  # .item() synchronizes, as in the seed
        return time.perf_counter() - start, losses


class Run:
    """One compiler's training run: the seed's model, data order and optimizer, from seed 0."""

    def __init__(self, name: str, compiler: Callable, device: str, model_kwargs: dict[str, Any],
                 samples: int = 640) -> None:
        torch.manual_seed(0)
        model = SimpleModel(**model_kwargs)
        image = model_kwargs.get("image", 32)
        data = TensorDataset(torch.randn(samples, 3, image, image), torch.randint(0, 10, (samples,)))
        self.name = name
        self.loader = DataLoader(data, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
        self.trainer = CompilationAwareTrainer(model, compiler, device)
        self.optimizer = torch.optim.Adam(self.trainer.module.parameters(), lr=1e-3)
        self.epochs: list[tuple[float, list[float]]] = []

    def epoch(self) -> None:
        self.epochs.append(self.trainer.train_epoch(self.loader, self.optimizer))

    def row(self) -> dict[str, Any]:
        row: dict[str, Any] = {"compiler": self.name, "epoch_s": [t for t, _ in self.epochs],
                               "losses": [loss for _, losses in self.epochs for loss in losses]}
        report = getattr(self.trainer.model, "report", None)
        if report is not None:
            row["fallback"] = report.eager_fallback or next((g.fallback for g in report.graphs if g.fallback), None)
            row["recompiles"] = len(self.trainer.model.reports) - 1
        return row


def run_interleaved(compilers: dict[str, Callable], device: str, epochs: int, model_kwargs: dict[str, Any],
                    samples: int = 640) -> list[dict[str, Any]]:
    """Train once per compiler, epoch by epoch in turn (epoch 1 of each, then epoch 2 of each, ...),
    so that a noisy moment of the machine does not land on one compiler's steady state."""
    runs = [Run(name, compiler, device, model_kwargs, samples) for name, compiler in compilers.items()]
    for _ in range(epochs):
        for run in runs:
            run.epoch()
    return [run.row() for run in runs]


def run(name: str, compiler: Callable, device: str, epochs: int, model_kwargs: dict[str, Any],
        samples: int = 640) -> dict[str, Any]:
    return run_interleaved({name: compiler}, device, epochs, model_kwargs, samples)[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m minicompiler.bench.training", description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--epochs", type=int, default=8, help="at least 2: the first, then the steady state")
    parser.add_argument("--width", type=int, default=64, help="conv1 channels (the seed: 64)")
    parser.add_argument("--only", action="append", help="run only compilers whose name contains this")
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args(argv)
    if opts.epochs < 2:
        parser.error("--epochs must be at least 2 (the first epoch compiles; the rest are the steady state)")
    cold_caches()  # epoch 1 includes compiling every kernel, as on a fresh machine
    env = environment(opts.device)
    print(" ".join(f"{k}={v}" for k, v in env.items()))
    chosen = {name: compiler for name, compiler in compilers().items()
              if not opts.only or any(s in name for s in opts.only) or name == "eager"}
    rows = run_interleaved(chosen, opts.device, opts.epochs, {"width": opts.width})
    eager = rows[0]
    print(f"{'compiler':30} {'epoch 1 s':>10} {'steady s':>10} {'vs eager':>9} {'max |loss - eager|':>19}  notes")
    for row in rows:
        diff = max(abs(a - b) for a, b in zip(row["losses"], eager["losses"], strict=True))
        row["max_loss_diff_vs_eager"] = diff
        row["steady_epoch_s"] = statistics.median(row["epoch_s"][1:])
        speedup = eager.get("steady_epoch_s", row["steady_epoch_s"]) / row["steady_epoch_s"]
        notes = row.get("fallback") or ""
        print(f"{row['compiler']:30} {row['epoch_s'][0]:10.3f} {row['steady_epoch_s']:10.4f} {speedup:8.2f}x"
              f" {diff:19.2e}  {notes}")
    if opts.json:
        opts.json.parent.mkdir(parents=True, exist_ok=True)
        opts.json.write_text(json.dumps({"environment": env, "model": {"width": opts.width}, "results": rows},
                                        indent=1))
        print(f"wrote {opts.json}")


if __name__ == "__main__":
    main()
