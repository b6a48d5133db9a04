"""The layout torch gives the result of an extern call, where it is not row-major.

`infer_meta` records an extern's result as row-major: meta tensors cannot say which kernel torch
will pick on the real device, and the wrapper makes any result laid out otherwise row-major with a
copy. One call is known to answer otherwise on every device: `scaled_dot_product_attention`'s
fused kernels (flash and memory-efficient, on the CPU and on CUDA) write their output as
(B, S, H, D) and return it transposed to (B, H, S, D). A model then transposes it back and calls
`.contiguous()` before its output projection: recorded row-major, the wrapper copied each attention
result to row-major, and a kernel copied it back to (B, S, H, D) for the model's `.contiguous()`.
Recorded as torch lays it out, the model's transpose is row-major already, its `.contiguous()` is
nothing (decompose/shapes.py) and the projection reads the attention's own output. Where torch
picks another kernel (its math fallback answers row-major), the wrapper copies the result into
this layout (`laid_out`), as it copied into row-major before.
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F

FUNCTION_AT = {"torch_call": 0, "recorded_call": 2}  # where the torch function is among an op's args


def _attention(shape: tuple[Any, ...]) -> tuple[int, ...] | None:
    if len(shape) != 4 or not all(isinstance(size, int) for size in shape):
        return None
    batch, heads, sequence, width = shape
    return (sequence * heads * width, width, heads * width, 1)


RESULT_STRIDES = {F.scaled_dot_product_attention: _attention}


def result_strides(op: str, args: tuple[Any, ...], shape: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The strides torch gives `op(*args)`'s result of this shape, if known to be other than row-major."""
    at = FUNCTION_AT.get(op)
    function = args[at] if at is not None and len(args) > at else None
    # (by identity: a callable torch_call holds need not be hashable)
    rule = next((rule for known, rule in RESULT_STRIDES.items() if known is function), None)
    return rule(shape) if rule is not None else None
