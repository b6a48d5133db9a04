"""torchvision classification and segmentation models beyond the five that `python -m minicompiler.bench`
times, through minicompiler on the CPU: does each capture whole, and does its eval output match eager?

    python benchmarks/torchvision_sweep.py [NAME ...]    (needs torchvision: Python 3.12's torch, see the README)

Random weights, 10 classes (5 for segmentation), a batch of 2 images of 96x96 (224x224 for the
windowed transformers, Swin and MaxViT), two compiled calls each checked against eager. One line
per model, as benchmarks/timm_sweep.py prints.
"""

from __future__ import annotations

import sys
import warnings

import torch
import torchvision

import minicompiler
from minicompiler.bench.capture_summary import capture_summary

CLASSIFIERS = ["shufflenet_v2_x0_5", "squeezenet1_0", "googlenet", "mnasnet0_5", "regnet_y_400mf", "swin_t",
               "maxvit_t", "wide_resnet50_2", "densenet121", "alexnet"]
SEGMENTERS = ["fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]


def build(name: str) -> torch.nn.Module:
    if name in SEGMENTERS:
        return getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, num_classes=5)
    extra = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
    return getattr(torchvision.models, name)(weights=None, num_classes=10, **extra)


def main_output(output: object) -> torch.Tensor:
    return output["out"] if isinstance(output, dict) else output  # segmentation: a dict of maps


def sweep(name: str) -> str:
    torch.manual_seed(0)
    model = build(name).eval()
    side = 224 if name in ("swin_t", "maxvit_t") else 96
    x = torch.randn(2, 3, side, side)
    compiled = minicompiler.compile(model)
    with torch.no_grad():
        expected = main_output(model(x))
        error = max(float((main_output(compiled(x)) - expected).abs().max()) for _ in range(2))
    return f"{name:30} difference {error / float(expected.abs().max()):.1e}  {capture_summary(compiled, 30)}"


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    versions = f"torchvision {torchvision.__version__}, torch {torch.__version__}, Python {sys.version.split()[0]}"
    print(f"{versions}, CPU, eval")
    for model_name in sys.argv[1:] or CLASSIFIERS + SEGMENTERS:
        print(sweep(model_name), flush=True)
