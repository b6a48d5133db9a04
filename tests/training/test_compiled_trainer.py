"""Seed 003's trainer pattern, written as the seed writes it, with `minicompiler.compile(model)` in
place of `torch.compile(model)`; and AMP (autocast + GradScaler) steps. Losses compared with eager."""

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import minicompiler
from minicompiler.bench.models import SimpleModel


class CompilationAwareTrainer:
    """The seed's trainer: the compiled model is the model (optimizer, train/eval, no_grad evaluation)."""

    def __init__(self, model: nn.Module, compile_model: bool) -> None:
        self.model = minicompiler.compile(model) if compile_model else model

    def train_epoch(self, loader: DataLoader, optimizer: torch.optim.Optimizer, criterion: nn.Module) -> list[float]:
        self.model.train()
        losses = []
        for data, target in loader:
            optimizer.zero_grad()
            loss = criterion(self.model(data), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses

    def validate(self, loader: DataLoader, criterion: nn.Module) -> float:
        self.model.eval()
        total = 0.0
        with torch.no_grad():
            for data, target in loader:
                total += criterion(self.model(data), target).item()
        return total / len(loader)


def seed_run(compile_model: bool, loader: DataLoader, adam: bool) -> tuple[list[float], list[float]]:
    torch.manual_seed(0)
    trainer = CompilationAwareTrainer(SimpleModel(width=4, image=8), compile_model)
    parameters = trainer.model.parameters()  # the compiled model's, as the seed builds its optimizer
    optimizer = torch.optim.Adam(parameters, lr=1e-3) if adam else torch.optim.SGD(parameters, lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    train, val = [], []
    for _ in range(2):
        train += trainer.train_epoch(loader, optimizer, criterion)
        val.append(trainer.validate(loader, criterion))
    return train, val


@pytest.mark.parametrize("adam", [False, True], ids=["sgd", "adam"])
def test_seed_003_trainer_unchanged_matches_eager(adam: bool):
    torch.manual_seed(1)
    data = TensorDataset(torch.randn(32, 3, 8, 8), torch.randint(0, 10, (32,)))
    loader = DataLoader(data, batch_size=8)
    compiled_train, compiled_val = seed_run(True, loader, adam)
    eager_train, eager_val = seed_run(False, loader, adam)
    # Adam (the seed's optimizer) moves a weight whose gradient is near zero by about lr whatever
    # its rounding, so float32 rounding differences grow to ~1e-3 of the loss within a few steps;
    # SGD keeps them at rounding size
    rtol, atol = (5e-3, 1e-3) if adam else (1e-4, 1e-5)
    torch.testing.assert_close(compiled_train, eager_train, rtol=rtol, atol=atol)
    torch.testing.assert_close(compiled_val, eager_val, rtol=rtol, atol=atol)


def amp_losses(compile_model: bool, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> list[float]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    net = minicompiler.compile(model) if compile_model else model
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = net(x)
            loss = nn.functional.cross_entropy(out, y)
        assert out.dtype == torch.bfloat16  # autocast's casts happened inside the compiled forward too
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses


def test_autocast_and_grad_scaler_steps_match_eager():
    torch.manual_seed(2)
    batches = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(4)]
    # bfloat16 keeps 8 bits of mantissa: compare as bfloat16 results are compared
    torch.testing.assert_close(amp_losses(True, batches), amp_losses(False, batches), rtol=2e-2, atol=2e-2)
