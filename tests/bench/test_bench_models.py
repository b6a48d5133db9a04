"""The whole-model benchmark (python -m minicompiler.bench): every row checks the compiled
result against eager (a compiler that gets it wrong is flagged, not timed as a success), the
JSON carries device, versions and sizes, and --profile splits a call's time into groups."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from minicompiler.bench.__main__ import main
from minicompiler.bench.chart import write_html
from minicompiler.bench.compare import bench_inference, bench_training, compilers
from minicompiler.bench.zoo import CASES, Built


def _small_mlp() -> Built:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4))
    return Built(module, (torch.randn(8, 16),), {"batch": 8})


class _Off(nn.Module):
    """A 'compiled' model whose output is slightly off: what a wrong compiler would produce."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x) * 1.1


def test_rows_check_against_eager_and_flag_wrong_results() -> None:
    chosen = {**compilers(["default"], torch_compile=False), "wrong": _Off}
    for bench in (bench_inference, bench_training):
        results, runnable = bench(_small_mlp(), chosen, repeats=2)
        assert results["minicompiler default"]["correct"], results["minicompiler default"]
        assert results["minicompiler default"]["kernels"] > 0
        assert not results["wrong"]["correct"] and results["wrong"]["rel_err"] > 0.05
        assert all(r["s"] > 0 for r in results.values())
        assert set(runnable) == set(chosen)


def test_a_training_step_is_judged_against_the_float64_step() -> None:
    """Eager float32 sets the bar: a step as close to the float64 step as eager's is right, even
    where float32 rounding makes it differ from eager's by more than the tolerance."""
    results, _ = bench_training(_small_mlp(), {**compilers(["default"], torch_compile=False), "wrong": _Off}, 1)
    exact = {name: row["rel_err_exact"] for name, row in results.items()}
    assert exact["minicompiler default"] <= 2 * exact["eager"] + 1e-6 and results["minicompiler default"]["correct"]
    assert exact["wrong"] > 0.05 and not results["wrong"]["correct"]


class _Cancels(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x + 1e6) - 1e6  # float32 keeps x to the nearest 1/16 only, float64 keeps it whole


def test_an_output_is_judged_against_the_float64_output() -> None:
    """As for a training step: an output as close to the float64 one as eager's is right, even where
    it differs from eager's by more than the tolerance (on a GPU, cuDNN's TF32 convolutions make
    eager's own output 3.5e-3 off for timm's MobileNetV3)."""
    built = Built(_Cancels(), (torch.randn(64, 8),), {"batch": 64})
    chosen = {"eager": lambda m: m, "precise": lambda m: (lambda x: m(x.double()).float()), "wrong": _Off}
    results, _ = bench_inference(built, chosen, 1)
    assert results["precise"]["rel_err"] > 2e-3 and results["precise"]["correct"], results["precise"]
    assert not results["wrong"]["correct"], results["wrong"]


def test_cli_writes_json_and_html_with_profile(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    main(["--quick", "--no-kernels", "--no-torch-compile", "--only", "MLP 1024", "--profile", "--repeats", "2",
          "--json", str(out)])
    data = json.loads(out.read_text())
    assert {"device", "torch", "python", "date"} <= set(data["environment"])
    rows = data["models"]
    assert [r["task"] for r in rows] == ["inference", "training"]
    for row in rows:
        assert row["sizes"]["batch"] > 0
        assert row["results"]["minicompiler default"]["correct"]
        profile = row["profile"]["minicompiler default"]
        assert set(profile["groups_ms"]) == {"generated", "torch", "overhead"}
        assert profile["groups_ms"]["generated"] > 0  # the C++ kernels are seen by the profiler
    assert "plotly" in out.with_suffix(".html").read_text()


def test_every_issue_workload_is_listed() -> None:
    names = " | ".join(case.name for case in CASES)
    for wanted in ("MLP", "MiniTransformer (", "MiniTransformer masked", "ResNet-18 b1", "ResNet-18 b16", "BERT",
                   "seed 003 CNN", "resnet50", "efficientnet", "convnext", "mobilenet", "vit"):
        assert wanted in names


def test_only_matches_parts_or_whole_names() -> None:
    from minicompiler.bench.suite import matches

    assert matches("ResNet-18 b16", "ResNet-18 b1") and not matches("ResNet-18 b16", "ResNet-18 b1$")
    assert matches("ResNet-18 b1", "ResNet-18 b1$")


def test_html_without_plotly_keeps_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU machine has no plotly: the benchmark must still write its page (it crashed there)."""
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "plotly" else real_find_spec(
        name, *a))
    page = tmp_path / "bench.html"
    write_html(page, {"device": "cpu"}, [], "the table", "")
    text = page.read_text()
    assert "the table" in text and "plotly is not installed" in text


def test_a_model_that_eager_cannot_run_is_a_row_that_says_so() -> None:
    """Eager's own failure (a model built for another input size) ends that row, not the run."""
    from minicompiler.bench.suite import _run_case
    from minicompiler.bench.zoo import ModelCase

    def make(device: str, quick: bool) -> Built:
        return Built(nn.Linear(16, 4), (torch.randn(8, 15),), {"batch": 8})

    row, runnable = _run_case(ModelCase("mismatched", "seed", make), "inference", "cpu", True, 2,
                              compilers(["default"], torch_compile=False))
    assert row["skipped"].startswith("eager failed: RuntimeError") and runnable == {}
