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

Its gradients, likewise. On the CPU the fused backward writes each of them as it writes the
output. On CUDA the memory-efficient backward lays each out as its input: where q, k and v are
views of one projection's output (B, S, 3, H, D), as a transformer's packed qkv gives them, it
writes all three into one such buffer. Recorded row-major, each was copied to row-major before
the three were put together as the projection's gradient; now they are read where torch wrote
them. (On the H200 that alone saved nothing: torch's cat then copied the strided gradients itself.
Put together in the projection's order, simplify/algebraic.py `_cat_of_permutes`, one copy per
attention call goes.)
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F

FUNCTION_AT = {"torch_call": 0, "recorded_call": 2}  # where the torch function is among an op's args
# a gradient op's args: (.., the function, the argument's position, the output's gradient, its args)
GRADIENT_FUNCTION_AT = {"torch_call_vjp": 0, "recorded_vjp": 2}


def _attention(shape: tuple[Any, ...]) -> tuple[int, ...] | None:
    if len(shape) != 4 or not all(isinstance(size, int) for size in shape):
        return None
    batch, heads, sequence, width = shape
    return (sequence * heads * width, width, heads * width, 1)


def _attention_gradient(argument: Any, shape: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The strides of attention's gradient for `argument` (q, k or v; a node or a tensor)."""
    meta = getattr(argument, "meta", argument)
    strides = meta.stride() if meta is not None else None
    if strides is None or not all(isinstance(s, int) for s in strides):
        return None
    if meta.device.type == "cuda":
        return None if meta.is_contiguous() else tuple(strides)
    return _attention(shape)


RESULT_STRIDES = {F.scaled_dot_product_attention: _attention}
GRADIENT_STRIDES = {F.scaled_dot_product_attention: _attention_gradient}


def result_strides(op: str, args: tuple[Any, ...], shape: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The strides torch gives `op(*args)`'s result of this shape, if known to be other than row-major."""
    if (at := GRADIENT_FUNCTION_AT.get(op)) is not None and len(args) > at + 2:
        rule = _rule_for(GRADIENT_STRIDES, args[at])
        argnum = args[at + 1]
        return rule(args[at + 3 + argnum], shape) if rule is not None and isinstance(argnum, int) else None
    at = FUNCTION_AT.get(op)
    rule = _rule_for(RESULT_STRIDES, args[at]) if at is not None and len(args) > at else None
    return rule(shape) if rule is not None else None


def _rule_for(rules: dict[Any, Any], function: Any) -> Any:
    # by identity: a callable a torch_call holds need not be hashable
    return next((rule for known, rule in rules.items() if known is function), None)
