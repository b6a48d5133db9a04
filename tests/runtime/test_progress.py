"""Progress bars (runtime/progress.py): the pipeline's stages move the bar while a graph compiles
(tqdm's bar, or a plain stderr line without tqdm); small graphs get none by default; results
are unchanged."""

from __future__ import annotations

import sys

import pytest
import torch

import minicompiler


def _model(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w).sum(dim=1)


@pytest.mark.parametrize("tqdm_installed", [True, False])
def test_stages_shown_when_asked(tqdm_installed: bool, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MINICOMPILER_PROGRESS", "1")
    if not tqdm_installed:
        monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import fails: the plain line
    x, w = torch.randn(8, 5), torch.randn(5, 3, requires_grad=True)
    compiled = minicompiler.compile(_model)
    torch.testing.assert_close(compiled(x, w), _model(x, w))
    shown = capsys.readouterr().err
    assert "a graph of" in shown
    if not tqdm_installed:  # every stage is written (tqdm redraws at most 10 times a second)
        assert "codegen (forward)" in shown and "fuse (backward)" in shown


def test_small_graphs_show_nothing_by_default(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("MINICOMPILER_PROGRESS", raising=False)
    x, w = torch.randn(8, 5), torch.randn(5, 3)
    torch.testing.assert_close(minicompiler.compile(_model)(x, w), _model(x, w))
    assert "graph of" not in capsys.readouterr().err
