"""Seed 003's CNN and MiniTransformer, compiled for training: outputs and every parameter's
gradient equal eager's (float32, rtol=atol=1e-4) on fresh random inputs, and the seed's
trainer runs with minicompiler and gives eager's losses."""

from __future__ import annotations

import copy

import torch

import minicompiler
from minicompiler.bench import training
from minicompiler.bench.models import MiniTransformer, SimpleModel

TOL = {"rtol": 1e-4, "atol": 1e-4}


def assert_same_gradients(model: torch.nn.Module, reference: torch.nn.Module) -> None:
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, q.grad, **TOL, msg=lambda m, name=name: f"{name}: {m}")


def compare_training_step(model: torch.nn.Module, make_input) -> minicompiler.CompiledFunction:
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model, backend="cpp")
    for _ in range(2):  # two calls, fresh inputs
        x = make_input()
        out, expected = compiled(x), reference(x)
        torch.testing.assert_close(out, expected, **TOL)
        model.zero_grad()
        reference.zero_grad()
        out.square().mean().backward()
        expected.square().mean().backward()
        assert_same_gradients(model, reference)
    return compiled


def test_cnn_gradients_match_eager_in_eval_mode() -> None:
    model = SimpleModel(width=4, image=8).eval()  # BatchNorm uses its running statistics
    compiled = compare_training_step(model, lambda: torch.randn(2, 3, 8, 8))
    assert compiled.report.graphs[0].fallback is None


def test_mini_transformer_gradients_match_eager_without_dropout() -> None:
    model = MiniTransformer(vocab_size=50, d_model=32, num_heads=4, num_layers=2, d_ff=64, max_seq_len=16,
                            dropout=0.0)
    compiled = compare_training_step(model, lambda: torch.randint(0, 50, (3, 16)))
    graph = compiled.report.graphs[0]
    assert graph.fallback is None and graph.autograd


def test_the_seed_trainer_with_minicompiler_gives_eager_losses() -> None:
    shrink = {"width": 4, "image": 32}
    eager = training.run("eager", lambda m: m, "cpu", epochs=1, model_kwargs=shrink, samples=64)
    compiled = training.run("minicompiler", lambda m: minicompiler.compile(m), "cpu", epochs=1,
                            model_kwargs=shrink, samples=64)
    torch.testing.assert_close(compiled["losses"], eager["losses"], rtol=1e-4, atol=1e-4)
    assert compiled["recompiles"] == 0
