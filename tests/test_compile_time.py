"""The report's compile time counts every stage, including the code generated on the first call
that needs it (inference, training, autocast), not only capture: a learner comparing compile time
with run time must see what compiling cost."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import minicompiler


def mlp(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w).sin().sum(dim=-1)


@pytest.fixture
def cold_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINICOMPILER_CACHE_DIR", str(tmp_path))  # nothing compiled earlier is reused


def stage_seconds(report: minicompiler.CompileReport) -> float:
    return sum(stage.seconds for graph in report.graphs for stage in graph.stages)


@pytest.mark.usefixtures("cold_cache")
def test_compile_time_includes_the_generated_inference_program() -> None:
    compiled = minicompiler.compile(mlp)
    x, w = torch.randn(8, 16), torch.randn(16, 16)
    torch.testing.assert_close(compiled(x, w), mlp(x, w))
    report = compiled.report
    assert any(stage.name == "codegen" for stage in report.graphs[0].stages)
    assert report.compile_seconds >= stage_seconds(report) > 0


@pytest.mark.usefixtures("cold_cache")
def test_compile_time_grows_when_a_backward_is_generated() -> None:
    compiled = minicompiler.compile(mlp)
    x, w = torch.randn(8, 16), torch.randn(16, 16)
    with torch.no_grad():
        compiled(x, w)
    before = compiled.report.compile_seconds
    w.requires_grad_()
    compiled(x, w).sum().backward()  # the training program is generated now
    after = compiled.report.compile_seconds
    assert after > before
    assert after >= stage_seconds(compiled.report)
