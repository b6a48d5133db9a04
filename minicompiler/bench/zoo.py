"""The whole models issue 15 measures, one factory each: `make(device, quick) -> Built`.

Each model is built with random weights (nothing is downloaded) and the sizes it runs at are
recorded with its results. `quick` shrinks what would take minutes on a small CPU (image size,
layer count, sequence length) while keeping each model's structure. A model whose library is
not importable here is skipped, with the reason printed and written to the JSON.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from minicompiler.bench.models import MiniTransformer
from minicompiler.bench.models import SimpleModel as Seed003CNN
from minicompiler.bench.workloads import SimpleModel as Seed000MLP


class Skip(Exception):
    """The model cannot be built here (its library is missing or broken); the message says why."""


@dataclass
class Built:
    module: nn.Module
    inputs: tuple[Any, ...]
    sizes: dict[str, Any]


@dataclass(frozen=True)
class ModelCase:
    name: str
    family: str  # "seed" | "transformers" | "timm" | "torchvision"
    make: Callable[[str, bool], Built]
    sizes_note: str = ""
    tags: tuple[str, ...] = field(default=())


def _image(batch: int, quick: bool, device: str, full: int = 224, small: int = 64) -> tuple[torch.Tensor]:
    side = small if quick else full
    return (torch.randn(batch, 3, side, side, device=device),)


def _mlp(device: str, quick: bool) -> Built:
    batch = 64 if quick else 1024
    return Built(Seed000MLP().to(device), (torch.randn(batch, 1024, device=device),), {"batch": batch, "width": 1024})


def _mini_transformer(masked: bool) -> Callable[[str, bool], Built]:
    def make(device: str, quick: bool) -> Built:
        sizes = dict(vocab=1000, d_model=256 if quick else 512, num_heads=8, num_layers=2 if quick else 6,
                     d_ff=1024 if quick else 2048, batch=4 if quick else 8, seq=64 if quick else 128)
        model = MiniTransformer(sizes["vocab"], sizes["d_model"], sizes["num_heads"], sizes["num_layers"],
                                sizes["d_ff"], dropout=0.0)
        ids = torch.randint(0, sizes["vocab"], (sizes["batch"], sizes["seq"]), device=device)
        inputs: tuple[Any, ...] = (ids,)
        if masked:  # causal: (1, 1, T, T), broadcast over batch and heads
            seq = sizes["seq"]
            inputs += (torch.tril(torch.ones(seq, seq, device=device)).view(1, 1, seq, seq),)
        return Built(model.to(device), inputs, {**sizes, "mask": "causal" if masked else None})

    return make


def _resnet18(batch: int) -> Callable[[str, bool], Built]:
    def make(device: str, quick: bool) -> Built:
        try:
            from minicompiler.bench.resnet import resnet18
        except ImportError as error:
            raise Skip(f"minicompiler.bench.resnet not importable: {error}") from None
        image = _image(batch, quick, device)
        return Built(resnet18().to(device), image, {"batch": batch, "image": image[0].shape[-1]})

    return make


def _seed003_cnn(device: str, quick: bool) -> Built:
    return Built(Seed003CNN().to(device), (torch.randn(32, 3, 32, 32, device=device),),
                 {"batch": 32, "image": 32, "width": 64})


class BertEncoder(nn.Module):
    """A BERT-base-sized encoder from a config (random weights): the hidden states out."""

    def __init__(self, layers: int) -> None:
        super().__init__()
        transformers = _import("transformers")
        config = transformers.BertConfig(num_hidden_layers=layers, hidden_dropout_prob=0.0,
                                         attention_probs_dropout_prob=0.0)
        self.bert = transformers.BertModel(config, add_pooling_layer=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def _bert(device: str, quick: bool) -> Built:
    layers, batch, seq = (2, 2, 64) if quick else (12, 8, 128)
    ids = torch.randint(0, 30522, (batch, seq), device=device)
    mask = torch.ones(batch, seq, dtype=torch.long, device=device)
    mask[0, seq // 2:] = 0  # one padded sequence, so the mask matters
    return Built(BertEncoder(layers).to(device), (ids, mask),
                 {"layers": layers, "hidden": 768, "heads": 12, "batch": batch, "seq": seq})


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except Exception as error:  # noqa: BLE001 - an ImportError, or a library that breaks on import
        raise Skip(f"{name} not importable: {type(error).__name__}: {str(error)[:160]}") from None


def _timm(model_name: str) -> Callable[[str, bool], Built]:
    def make(device: str, quick: bool) -> Built:
        # a ViT is built for one image size: quick builds it for the small one
        size = {"img_size": 64} if quick and model_name.startswith("vit") else {}
        model = _import("timm").create_model(model_name, pretrained=False, **size)
        return Built(model.to(device), _image(16, quick, device), {"batch": 16, "image": 64 if quick else 224})

    return make


def _torchvision(model_name: str) -> Callable[[str, bool], Built]:
    def make(device: str, quick: bool) -> Built:
        models = _import("torchvision.models")
        size = {"image_size": 64} if quick and model_name.startswith("vit") else {}  # as timm's
        model = getattr(models, model_name)(weights=None, **size)
        image = _image(16, quick, device)
        return Built(model.to(device), image, {"batch": 16, "image": image[0].shape[-1]})

    return make


CASES: list[ModelCase] = [
    ModelCase("MLP 1024 (seed 000)", "seed", _mlp),
    ModelCase("MiniTransformer (seed 003)", "seed", _mini_transformer(False)),
    ModelCase("MiniTransformer masked (seed 003)", "seed", _mini_transformer(True)),
    ModelCase("ResNet-18 b1", "seed", _resnet18(1)),
    ModelCase("ResNet-18 b16", "seed", _resnet18(16)),
    ModelCase("seed 003 CNN", "seed", _seed003_cnn),
    ModelCase("BERT-base encoder", "transformers", _bert),
    *[ModelCase(f"timm {n}", "timm", _timm(n)) for n in
      ("resnet50", "efficientnet_b0", "convnext_tiny", "mobilenetv3_large_100", "vit_base_patch16_224")],
    *[ModelCase(f"torchvision {n}", "torchvision", _torchvision(n)) for n in
      ("resnet50", "efficientnet_b0", "convnext_tiny", "mobilenet_v3_large", "vit_b_16")],
]


def quiet_randomness(module: nn.Module) -> nn.Module:
    """Dropout and stochastic depth off (p = 0), so a training step's compiled result can be
    compared with eager's: both would draw different random masks otherwise."""
    for sub in module.modules():
        if isinstance(sub, nn.Dropout) or type(sub).__name__ in ("StochasticDepth", "DropPath"):
            for attribute in ("p", "drop_prob"):
                if isinstance(getattr(sub, attribute, None), float):
                    setattr(sub, attribute, 0.0)
    return module
