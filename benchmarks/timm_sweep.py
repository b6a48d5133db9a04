"""timm model families beyond the five that `python -m minicompiler.bench` times, through minicompiler
on the CPU: does each capture whole, and does its eval forward match eager?

    python benchmarks/timm_sweep.py [NAME ...]        (needs timm, so torchvision: see the README)

Each model has random weights and 10 classes, and takes a batch of 2 images at its own input size
(a head that starts at zero, MLP-Mixer's, is given random weights: else every output would be 0).
It runs twice compiled (the second call reuses the program), each output checked against eager's.
One line per model: the largest difference from eager over both calls (relative to eager's largest
output), graphs, graph breaks (the first one's reason and line), graphs that fell back to torch,
and calls run eagerly whole.
"""

from __future__ import annotations

import sys
import warnings

import timm
import torch

import minicompiler
from minicompiler.bench.capture_summary import capture_summary

MODELS = ["densenet121", "regnetx_002", "inception_v3", "swin_tiny_patch4_window7_224", "deit_tiny_patch16_224",
          "beit_base_patch16_224", "levit_128s", "mixer_b16_224", "coatnet_0_rw_224", "efficientformer_l1",
          "mobilevit_xxs", "repvgg_a0", "dla34", "hrnet_w18_small", "xception41", "ghostnet_100", "rexnet_100",
          "resnest14d", "cspresnet50", "vgg11", "poolformer_s12", "maxvit_tiny_rw_224", "edgenext_xx_small",
          "fastvit_t8"]


def sweep(name: str) -> str:
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, num_classes=10).eval()
    heads = model.get_classifier()  # (LeViT has two)
    for head in (heads if isinstance(heads, tuple) else (heads,)):
        for layer in head.modules():  # some start at zero (MLP-Mixer's): then so would the output
            if isinstance(layer, torch.nn.Linear):
                torch.nn.init.normal_(layer.weight, std=0.02)
    x = torch.randn(2, *model.default_cfg["input_size"])
    compiled = minicompiler.compile(model)
    with torch.no_grad():
        expected = model(x)
        error = max(float((compiled(x) - expected).abs().max()) for _ in range(2))
    scale = float(expected.abs().max())
    return f"{name:30} difference {error / scale:.1e}  {capture_summary(compiled, 30)}"


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    print(f"timm {timm.__version__}, torch {torch.__version__}, Python {sys.version.split()[0]}, CPU, eval")
    for model_name in sys.argv[1:] or MODELS:
        print(sweep(model_name), flush=True)
