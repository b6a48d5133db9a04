"""Products of vectors written as a multiply and a sum: dot, inner, mv, outer, addr, trace,
linalg.vecdot and cosine_similarity. Each is a short reduction, so it becomes a generated kernel
(fused with what reads it) rather than a BLAS call; matmul and friends, where BLAS wins, stay
extern (matmul.py). Also products with no sum (cross, kron) and diff, neighbours' differences.

Same conventions as `torch_ops.py`. Integer and complex products stay whole (torch keeps their
dtypes, which a sum would widen), and float16/bfloat16 products are summed in float32, as
torch's kernels accumulate them.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.capture.torch_formulas import vector_norm
from minicompiler.capture.torch_ops import Lowering, extern, lowers, norm_dim
from minicompiler.capture.torch_views import cat, slice_dim
from minicompiler.ir import Graph, Node

LOW_PRECISION = (torch.float16, torch.bfloat16)


def _real_floats(*values: Any) -> bool:
    return all(isinstance(v, Node) and v.meta.dtype.is_floating_point for v in values)


def _sum_of_products(g: Graph, a: Node, b: Node, dim: int) -> Node:
    """sum(a * b) along `dim` (of their broadcast shape), in float32 for float16/bfloat16."""
    dtype = torch.promote_types(a.meta.dtype, b.meta.dtype)
    if dtype in LOW_PRECISION:
        a, b = g.call("convert", a, torch.float32), g.call("convert", b, torch.float32)
    total = g.call("sum", g.call("mul", a, b), (dim,), False)
    return g.call("convert", total, dtype) if dtype in LOW_PRECISION else total


def _column(g: Graph, v: Node) -> Node:
    return g.call("reshape", v, (v.meta.shape[0], 1))  # (n,) -> (n, 1)


def _dot(fn: Any) -> Lowering:
    def lowering(g: Graph, a: Any, b: Any) -> Node:
        # sum(a[i] * b[i]); vdot conjugates a first, which leaves a real number as it is
        if not (_real_floats(a, b) and a.meta.dtype == b.meta.dtype and a.meta.ndim == b.meta.ndim == 1):
            return extern(g, fn, a, b)
        return _sum_of_products(g, a, b, 0)

    return lowering


lowers(torch.dot, methods=["dot"])(_dot(torch.dot))
lowers(torch.vdot, methods=["vdot"])(_dot(torch.vdot))


@lowers(torch.inner, methods=["inner"])
def inner(g: Graph, a: Any, b: Any) -> Node:
    # sum over the last dim of both: result[i..., j...] = sum(a[i..., k] * b[j..., k])
    if not _real_floats(a, b):
        return extern(g, torch.inner, a, b)
    if a.meta.ndim == 0 or b.meta.ndim == 0:  # a number times a tensor
        return g.call("mul", a, b)
    *rows, k = a.meta.shape
    # a: (*rows, 1, ..., 1, k) against b: (*cols, k) -> (*rows, *cols, k)
    a = g.call("reshape", a, (*rows, *(1,) * (b.meta.ndim - 1), k))
    return _sum_of_products(g, a, b, len(rows) + b.meta.ndim - 1)


@lowers(torch.linalg.vecdot)
def vecdot(g: Graph, a: Any, b: Any, *, dim: int = -1) -> Node:
    # sum(conj(a) * b) along dim of their broadcast shape; conj leaves a real number as it is
    if not (_real_floats(a, b) and a.meta.dtype == b.meta.dtype):
        return extern(g, torch.linalg.vecdot, a, b, dim=dim)
    return _sum_of_products(g, a, b, norm_dim(dim, max(a.meta.ndim, b.meta.ndim)))


@lowers(torch.mv, methods=["mv"])
def mv(g: Graph, matrix: Any, v: Any) -> Node:
    # sum(matrix[i, k] * v[k]) over k
    if not (_real_floats(matrix, v) and matrix.meta.dtype == v.meta.dtype and matrix.meta.ndim == 2):
        return extern(g, torch.mv, matrix, v)
    return _sum_of_products(g, matrix, v, 1)


@lowers(torch.outer, torch.ger, methods=["outer", "ger"])
def outer(g: Graph, a: Any, b: Any) -> Node:
    # a[i] * b[j]: a column times a row, broadcast
    if not (isinstance(a, Node) and isinstance(b, Node) and a.meta.ndim == b.meta.ndim == 1):
        return extern(g, torch.outer, a, b)
    return g.call("mul", _column(g, a), g.call("reshape", b, (1, b.meta.shape[0])))


@lowers(torch.addr, methods=["addr"])
def addr(g: Graph, x: Any, v1: Any, v2: Any, *, beta: Any = 1, alpha: Any = 1) -> Node:
    # beta * x + alpha * v1[i] * v2[j]; with beta == 0, x is not read (its NaNs do not show), as torch
    if not (_real_floats(x, v1, v2) and v1.meta.ndim == v2.meta.ndim == 1):
        return extern(g, torch.addr, x, v1, v2, beta=beta, alpha=alpha)
    scaled = _column(g, v1) if alpha == 1 else g.call("mul", _column(g, v1), alpha)
    product = g.call("mul", scaled, g.call("reshape", v2, (1, v2.meta.shape[0])))
    if beta == 0:
        return g.call("convert", product, torch.promote_types(x.meta.dtype, product.meta.dtype))
    return g.call("add", x if beta == 1 else g.call("mul", x, beta), product)


def _cross(fn: Any) -> Lowering:
    def lowering(g: Graph, a: Any, b: Any, dim: int | None = None) -> Node:
        # c[i] = a[i+1] b[i+2] - a[i+2] b[i+1] (indices mod 3) along dim of their broadcast shape;
        # torch.cross without dim takes the first dim of size 3
        shape = torch.broadcast_shapes(a.meta.shape, b.meta.shape) if _real_floats(a, b) else ()
        if dim is None:
            dim = next((d for d, size in enumerate(shape) if size == 3), None)
        if dim is None or a.meta.dtype != b.meta.dtype or shape[norm_dim(dim, len(shape))] != 3:
            return extern(g, fn, a, b, dim=dim)  # (torch raises on a dim whose size is not 3)
        dim = norm_dim(dim, len(shape))
        a, b = g.call("expand", a, shape), g.call("expand", b, shape)
        index = g.call("iota", tuple(3 if d == dim else 1 for d in range(len(shape))), dim, torch.int64,
                       a.meta.device)

        def rotated(x: Node, shift: int) -> Node:  # x[(i + shift) % 3] along dim: a choice of 3 slices
            part = [g.call("slice", x, dim, (i + shift) % 3, (i + shift) % 3 + 1, 1) for i in range(3)]
            return g.call("where", g.call("eq", index, 0), part[0],
                          g.call("where", g.call("eq", index, 1), part[1], part[2]))

        return g.call("sub", g.call("mul", rotated(a, 1), rotated(b, 2)), g.call("mul", rotated(a, 2), rotated(b, 1)))

    return lowering


lowers(torch.cross, methods=["cross"])(_cross(torch.cross))
lowers(torch.linalg.cross)(lambda g, a, b, *, dim=-1: _cross(torch.linalg.cross)(g, a, b, dim))


@lowers(torch.kron, methods=["kron"])
def kron(g: Graph, a: Any, b: Any) -> Node:
    # result[i * m + k] = a[i] b[k] in each dim: a (n0, 1, n1, 1, ...) times b (1, m0, 1, m1, ...),
    # read as (n0 m0, n1 m1, ...); the shorter shape has 1s put in front
    if not (_real_floats(a, b) and all(isinstance(s, int) for s in (*a.meta.shape, *b.meta.shape))):
        return extern(g, torch.kron, a, b)
    ndim = max(a.meta.ndim, b.meta.ndim)
    n = (1,) * (ndim - a.meta.ndim) + tuple(a.meta.shape)
    m = (1,) * (ndim - b.meta.ndim) + tuple(b.meta.shape)
    a = g.call("reshape", a, tuple(x for size in n for x in (size, 1)))
    b = g.call("reshape", b, tuple(x for size in m for x in (1, size)))
    return g.call("reshape", g.call("mul", a, b), tuple(i * k for i, k in zip(n, m, strict=True)))


@lowers(torch.trace, methods=["trace"])
def trace(g: Graph, x: Any) -> Node:
    # the sum of the diagonal: x where row == column, 0 elsewhere, summed
    if not _real_floats(x) or x.meta.ndim != 2:
        return extern(g, torch.trace, x)
    rows, cols = x.meta.shape
    row = g.call("iota", (rows, 1), 0, torch.int64, x.meta.device)
    col = g.call("iota", (1, cols), 1, torch.int64, x.meta.device)
    return g.call("sum", g.call("where", g.call("eq", row, col), x, 0), (0, 1), False)


@lowers(F.cosine_similarity, torch.cosine_similarity)
def cosine_similarity(g: Graph, x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Node:
    # sum(x1 / ||x1|| * x2 / ||x2||) along dim, each norm at least eps: torch divides first, which
    # keeps the result within [-1, 1]
    if not _real_floats(x1, x2) or x1.meta.dtype != x2.meta.dtype:
        return extern(g, F.cosine_similarity, x1, x2, dim, eps)
    shape = torch.broadcast_shapes(x1.meta.shape, x2.meta.shape)
    dim = norm_dim(dim, len(shape))
    x1, x2 = g.call("expand", x1, shape), g.call("expand", x2, shape)
    return g.call("sum", g.call("mul", _over_norm(g, x1, dim, eps), _over_norm(g, x2, dim, eps)), (dim,), False)


def _over_norm(g: Graph, x: Node, dim: int, eps: float) -> Node:
    """x / max(||x||, eps) along dim. torch clamps the norm under no_grad, so its gradient is the
    norm's own even where the clamp applies: norm + detach(clamped - norm) has that value and that gradient."""
    norm = vector_norm(g, x, 2, dim, True)
    clamped = g.call("add", norm, g.call("detach", g.call("sub", g.call("maximum", norm, eps), norm)))
    return g.call("div", x, clamped)


@lowers(torch.diff, methods=["diff"])
def diff(g: Graph, x: Any, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Node:
    # x[1:] - x[:-1] along dim, n times, after prepend and append are put at x's two ends;
    # booleans differ where they are not equal (xor), as in torch
    ends = [t for t in (prepend, append) if t is not None]
    if not (isinstance(x, Node) and x.meta.ndim >= 1 and all(isinstance(t, Node) and t.meta.ndim == x.meta.ndim
                                                             for t in ends)):
        return extern(g, torch.diff, x, n, dim, prepend, append)
    if n == 0:
        return x  # torch leaves x as it is, prepend and append unread
    dim = norm_dim(dim, x.meta.ndim)
    x = cat(g, [t for t in (prepend, x, append) if t is not None], dim)
    subtract = "logical_xor" if x.meta.dtype == torch.bool else "sub"
    for _ in range(min(n, x.meta.shape[dim])):  # each step is one shorter: none is left after size steps
        x = g.call(subtract, slice_dim(g, x, dim, slice(1, None)), slice_dim(g, x, dim, slice(None, -1)))
    return x


@lowers(torch.trapezoid, torch.trapz)
def trapezoid(g: Graph, y: Any, x: Any = None, *, dx: float | None = None, dim: int = -1) -> Node:
    # the trapezoid rule along dim: sum of (y[i+1] + y[i]) / 2 times the step, dx or x[i+1] - x[i]
    if not _real_floats(y) or (x is not None and not isinstance(x, Node)) or y.meta.ndim == 0:
        return extern(g, torch.trapezoid, y, x, dx=dx, dim=dim) if x is not None else \
            extern(g, torch.trapezoid, y, dx=1.0 if dx is None else dx, dim=dim)
    dim = norm_dim(dim, y.meta.ndim)
    if y.meta.shape[dim] == 0:
        return g.call("sum", y, (dim,), False)  # zeros, as torch's
    heights = g.call("add", slice_dim(g, y, dim, slice(1, None)), slice_dim(g, y, dim, slice(None, -1)))
    if x is None:
        return g.call("mul", g.call("sum", heights, (dim,), False), 0.5 * (1.0 if dx is None else dx))
    if x.meta.ndim == 1:  # one row of sample points for every row of y
        x = g.call("reshape", x, tuple(x.meta.shape[0] if d == dim else 1 for d in range(y.meta.ndim)))
    xdim = dim - (y.meta.ndim - x.meta.ndim)
    steps = g.call("sub", slice_dim(g, x, xdim, slice(1, None)), slice_dim(g, x, xdim, slice(None, -1)))
    return g.call("div", g.call("sum", g.call("mul", steps, heights), (dim,), False), 2.0)


@lowers(methods=["sum_to_size"])
def sum_to_size(g: Graph, x: Node, *size: Any) -> Node:
    # x summed down to `size` (which x broadcasts to): over its extra leading dims, and over each
    # dim where size has 1 and x does not (kept, as size 1)
    size = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else tuple(size)
    lead = x.meta.ndim - len(size)
    if lead < 0 or x.meta.dtype.is_complex:
        return extern(g, torch.Tensor.sum_to_size, x, size)
    kept = tuple(lead + d for d, n in enumerate(size) if n == 1 and x.meta.shape[lead + d] != 1)
    if kept:
        x = g.call("sum", x, kept, True)
    return g.call("sum", x, tuple(range(lead)), False) if lead else x
