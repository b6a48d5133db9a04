"""Hugging Face models at full size (random weights from configs, nothing downloaded): graphs, breaks and
time per forward for eager, torch.compile and minicompiler, in one run on one device.

    python benchmarks/transformers_models.py [--device cuda] [--batch 8] [--seq 128] [--json PATH]

Each time is the median of timed batches after warm-up, synchronized (minicompiler.bench.timing). Every compiled
output is compared with eager before it is timed; a model whose output differs is reported, not timed.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from typing import Any

import torch
import transformers
from torch import nn

import minicompiler
from minicompiler.bench.timing import first_call_seconds, median_call_seconds

VOCAB = 30522


def bert_base() -> nn.Module:
    return transformers.BertModel(transformers.BertConfig())  # bert-base-uncased's sizes


def gpt2_small() -> nn.Module:
    return transformers.GPT2Model(transformers.GPT2Config())  # gpt2 (124M)'s sizes


def vit_base() -> nn.Module:
    return transformers.ViTModel(transformers.ViTConfig())  # vit-base-patch16-224's sizes


def llama_small() -> nn.Module:  # a Llama-style decoder of ~0.2B parameters (GQA, RoPE, RMSNorm)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=1024, intermediate_size=2816,
                                      num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4)
    return transformers.LlamaModel(config)


def distilbert_base() -> nn.Module:
    return transformers.DistilBertModel(transformers.DistilBertConfig())


MODELS: dict[str, tuple[Callable[[], nn.Module], str]] = {
    "BertModel (base)": (bert_base, "tokens"),
    "GPT2Model (124M)": (gpt2_small, "tokens"),
    "ViTModel (base/16, 224)": (vit_base, "pixels"),
    "LlamaModel (8x1024)": (llama_small, "tokens"),
    "DistilBertModel (base)": (distilbert_base, "tokens"),
}


def make_inputs(kind: str, batch: int, seq: int, device: str) -> tuple[tuple, dict[str, Any]]:
    if kind == "pixels":
        return (torch.randn(batch, 3, 224, 224, device=device),), {}
    tokens = torch.randint(0, VOCAB, (batch, seq), device=device)
    mask = torch.ones(batch, seq, dtype=torch.long, device=device)
    mask[0, seq // 2:] = 0  # one padded sequence, so the mask matters
    return (tokens,), {"attention_mask": mask}


def first_tensor(output: Any) -> torch.Tensor:
    return output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]


def bench_model(name: str, device: str, batch: int, seq: int, repeats: int) -> dict[str, Any]:
    build, kind = MODELS[name]
    torch.manual_seed(0)
    model = build().to(device).eval()
    args, kwargs = make_inputs(kind, batch, seq, device)
    call = lambda fn: (lambda *_: fn(*args, **kwargs))  # noqa: E731 - the timers pass `expected` (to sync)
    row: dict[str, Any] = {"model": name, "parameters_M": round(sum(p.numel() for p in model.parameters()) / 1e6, 1)}
    with torch.no_grad():
        explained = minicompiler.explain(model)(*args, **kwargs)
        row["graphs"], row["breaks"] = explained.graph_count, explained.graph_break_count
        expected = first_tensor(model(*args, **kwargs))
        row["eager_ms"] = 1e3 * median_call_seconds(call(model), (expected,), repeats)
        for label, compiled in [("minicompiler", minicompiler.compile(model)), ("torch.compile", torch.compile(model))]:
            row[f"{label}_first_call_s"] = first_call_seconds(call(compiled), (expected,))
            got = first_tensor(compiled(*args, **kwargs))
            error = (got.double() - expected.double()).abs().max().item()
            row[f"{label}_max_abs_err"] = error
            if not torch.allclose(got, expected, rtol=1e-3, atol=1e-3):
                row[f"{label}_ms"] = None  # wrong: not timed
                continue
            row[f"{label}_ms"] = 1e3 * median_call_seconds(call(compiled), (expected,), repeats)
    return row


def print_table(rows: list[dict[str, Any]], header: dict[str, Any]) -> None:
    print(" ".join(f"{k}={v}" for k, v in header.items()))
    print(f"{'model':26} {'M':>6} {'graphs':>6} {'breaks':>6} {'eager ms':>9} {'torch.compile':>13} "
          f"{'minicompiler':>12} {'mc vs eager':>11} {'mc compile s':>12} {'tc compile s':>12}")
    for r in rows:
        mc, tc = r.get("minicompiler_ms"), r.get("torch.compile_ms")
        fmt = lambda v: "wrong" if v is None else f"{v:.3f}"  # noqa: E731
        speedup = f"{r['eager_ms'] / mc:.2f}x" if mc else "-"
        print(f"{r['model']:26} {r['parameters_M']:6.1f} {r['graphs']:6d} {r['breaks']:6d} {r['eager_ms']:9.3f} "
              f"{fmt(tc):>13} {fmt(mc):>12} {speedup:>11} {r['minicompiler_first_call_s']:12.1f} "
              f"{r['torch.compile_first_call_s']:12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--only", help="a substring of the model names")
    parser.add_argument("--json")
    options = parser.parse_args()
    header = {"device": torch.cuda.get_device_name() if options.device == "cuda" else platform.processor() or "cpu",
              "python": platform.python_version(), "torch": torch.__version__,
              "transformers": transformers.__version__, "batch": options.batch, "seq": options.seq,
              "date": time.strftime("%Y-%m-%d")}
    names = [n for n in MODELS if not options.only or options.only.lower() in n.lower()]
    rows = []
    for name in names:
        rows.append(bench_model(name, options.device, options.batch, options.seq, options.repeats))
        print(rows[-1], flush=True)
    print_table(rows, header)
    if options.json:
        with open(options.json, "w") as f:
            json.dump({"environment": header, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
