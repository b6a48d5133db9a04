"""Signs and rounded divisions written as formulas of primitives: copysign, round to some
decimals, division rounded down (floor_divide) or towards zero, as torch's CPU kernels compute them;
and the triangles of a matrix (tril, triu), which compare element coordinates (iota).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from minicompiler.decompose.table import GraphOps, computed_in_float32, register_decomposition
from minicompiler.ir import Node, infer_meta


@register_decomposition("copysign")
def copysign(ops: GraphOps, x: Node, sign: Any) -> Node:
    # |x| with the sign bit of `sign` (-0.0 counts as negative); its gradient is g * sign(x) *
    # the sign it got, 0 at x = 0, as torch's
    dtype = infer_meta("copysign", (x, sign), {}).dtype
    magnitude = ops.abs(ops.convert(x, dtype))
    if not isinstance(sign, Node):
        return ops.neg(magnitude) if math.copysign(1.0, sign) < 0 else magnitude
    return ops.where(ops.signbit(sign), ops.neg(magnitude), magnitude)


@register_decomposition("round_decimals", upcast=True)
def round_decimals(ops: GraphOps, x: Node, decimals: int) -> Node:
    # torch: nearbyint(x * 10^d) / 10^d, or for d < 0 nearbyint(x / 10^-d) * 10^-d
    if decimals == 0:
        return ops.round(x)
    scale = float(10 ** abs(decimals))
    if decimals > 0:
        return ops.div(ops.round(ops.mul(x, scale)), scale)
    return ops.mul(ops.round(ops.div(x, scale)), scale)


@register_decomposition("div_rounded")
def div_rounded(ops: GraphOps, a: Any, b: Any, rounding_mode: str) -> Node:
    """a / b rounded towards zero ("trunc") or down ("floor"), for a floating result."""
    if rounding_mode == "trunc":  # torch rounds a float16/bfloat16 quotient to its dtype first
        return ops.trunc(ops.div(a, b))
    return _div_floor(ops, a, b)


def _floor_of_quotient(ops: GraphOps, a: Any, b: Any) -> Node:
    # torch's div_floor_floating, in float32 for float16/bfloat16 as torch's. (a - fmod(a, b)) / b
    # is a whole number up to rounding (a division computed as a product by 1/b may land just
    # below it: the last step rounds it); one less where the remainder's sign differs from b's;
    # a / b itself where b == 0
    if not isinstance(b, Node) and b == 0:
        return ops.div(a, b)
    b_negative = ops.lt(b, 0) if isinstance(b, Node) else b < 0
    mod = ops.fmod(a, b)
    quotient = ops.div(ops.sub(a, mod), b)
    quotient = ops.where(ops.logical_and(ops.ne(mod, 0), ops.ne(ops.lt(mod, 0), b_negative)),
                         ops.sub(quotient, 1), quotient)
    floor = ops.floor(quotient)
    floor = ops.where(ops.gt(ops.sub(quotient, floor), 0.5), ops.add(floor, 1), floor)
    # a zero quotient takes the sign of a / b (-0.0 for -1 // 3)
    floor = ops.where(ops.eq(quotient, 0), ops.copysign(ops.mul(quotient, 0), ops.div(a, b)), floor)
    return ops.where(ops.eq(b, 0), ops.div(a, b), floor) if isinstance(b, Node) else floor


_div_floor = computed_in_float32("div", _floor_of_quotient)


def _triangle(ops: GraphOps, x: Node, diagonal: int, lower: bool) -> Node:
    # keep x where column - row <= diagonal (tril) or >= diagonal (triu), 0 elsewhere
    *batch, rows, cols = x.meta.shape
    ones = [1] * len(batch)
    row = ops.iota((*ones, rows, 1), len(batch), torch.int64, x.meta.device)
    col = ops.iota((*ones, 1, cols), len(batch) + 1, torch.int64, x.meta.device)
    offset = ops.sub(col, row)
    keep = ops.le(offset, diagonal) if lower else ops.ge(offset, diagonal)
    return ops.where(keep, x, False if x.meta.dtype == torch.bool else 0)


@register_decomposition("tril")
def tril(ops: GraphOps, x: Node, diagonal: int = 0) -> Node:
    return _triangle(ops, x, diagonal, lower=True)


@register_decomposition("triu")
def triu(ops: GraphOps, x: Node, diagonal: int = 0) -> Node:
    return _triangle(ops, x, diagonal, lower=False)
