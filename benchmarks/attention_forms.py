"""Attention alone: one SDPA call against minicompiler's kernels for the hand-written form.

    python benchmarks/attention_forms.py

`replace/attention.py` turns softmax(q @ k^T * scale [masked]) @ v into scaled_dot_product_attention
unless a float32 training step on a GPU is compiled. This is the measurement behind that choice:
8 attentions in a row (q = k = v = the last result), compiled by minicompiler with the replacement
(SDPA) and without it (our batched matmuls and fused softmax), mode="reduce-overhead" on a GPU so
that the GPU's time is what is compared, for inference and for forward + backward. Median ms per
call; the sizes are (B, H, L, D), float32, causal mask or none. Results: benchmarks/results/h200_2026-11-28g/.
"""

from __future__ import annotations

import torch

import minicompiler
from minicompiler.bench.timing import median_call_seconds
from minicompiler.replace import attention

SIZES = [(8, 8, 128, 64), (8, 12, 128, 64), (4, 8, 512, 64), (1, 8, 2048, 64), (32, 8, 64, 32)]


def attentions(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    for _ in range(8):
        scores = torch.matmul(x, x.transpose(-2, -1)) * (x.shape[-1] ** -0.5)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        x = torch.matmul(torch.softmax(scores, dim=-1), x)
    return x


def milliseconds(x: torch.Tensor, mask: torch.Tensor | None, training: bool, replaced: bool, mode: str) -> float:
    chain, faster_as_written = attention._chain, attention._faster_as_written
    if replaced:  # every attention recognized is replaced, training or not
        attention._faster_as_written = lambda out: False
    else:  # no attention is recognized while this compiles: it stays as written
        attention._chain = lambda out, users: None
    try:
        compiled = minicompiler.compile(attentions, mode=mode)
        grad = torch.randn_like(x)

        def call(x: torch.Tensor) -> None:
            if training:
                x.grad = None
                compiled(x, mask).backward(grad)
            else:
                with torch.no_grad():
                    compiled(x, mask)

        call(x)  # compiles
    finally:
        attention._chain, attention._faster_as_written = chain, faster_as_written
    return median_call_seconds(call, (x,), repeats=15) * 1e3


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    mode = "reduce-overhead" if device == "cuda" else "default"
    sizes = SIZES if device == "cuda" else [(2, 2, 16, 8)]
    print(f"ms per call, 8 attentions, float32, {mode}, on "
          f"{torch.cuda.get_device_name() if device == 'cuda' else 'the CPU'}")
    for b, h, length, d in sizes:
        for masked in (False, True):
            mask = torch.tril(torch.ones(length, length, device=device)).view(1, 1, length, length) if masked else None
            cells = []
            for training in (False, True):
                x = torch.randn(b, h, length, d, device=device, requires_grad=training)
                sdpa, ours = (milliseconds(x, mask, training, replaced, mode) for replaced in (True, False))
                cells.append(f"{'training' if training else 'inference'}: SDPA {sdpa:.3f}, ours {ours:.3f} "
                             f"({ours / sdpa:.2f})")
            print(f"B{b} H{h} L{length} D{d} {'causal' if masked else 'no mask'}: " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
