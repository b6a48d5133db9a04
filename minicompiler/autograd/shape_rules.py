"""VJP rules of the reductions, views and extern calls: gradients that move data around.

A reduction's gradient is spread back over the reduced dims; a view's gradient is the
inverse view; a matrix product's gradients are matrix products.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from minicompiler.autograd import pool_gradient
from minicompiler.autograd.vjp import Grads, GraphOps, NotDifferentiable, normalize_dim, sum_to_size, vjp, zeros
from minicompiler.decompose.pooling import POOL_WINDOWS, argmax_behind
from minicompiler.ir import OPS, Node
from minicompiler.ir.gather import accumulate_at, accumulate_rows
from minicompiler.ir.graph import contiguous_strides
from minicompiler.ir.scatter import ATOMIC_DTYPES
from minicompiler.ir.symbolic_shapes import slice_bounds


# --- reductions ----------------------------------------------------------------------------
def _with_reduced_dims(ops: GraphOps, t: Node, x: Node, dims: tuple[int, ...], keepdim: bool) -> Node:
    """Reshape a reduction's result `t` to x's rank, with size 1 in the reduced dims."""
    reduced = {normalize_dim(d, x.meta.ndim) for d in dims} if dims else set(range(x.meta.ndim))
    shape = tuple(1 if i in reduced else size for i, size in enumerate(x.meta.shape))
    return t if keepdim or t.meta.shape == shape else ops.reshape(t, shape)


@vjp("sum")  # d/dx sum(x) = 1 for every element: g is copied back over the reduced dims
def vjp_sum(ops: GraphOps, g: Node, y: Node, x: Node, dims: tuple[int, ...], keepdim: bool = False) -> Grads:
    return (ops.expand(_with_reduced_dims(ops, g, x, dims, keepdim), x.meta.shape),)


def _extremum_vjp(op: str) -> Callable[..., Grads]:
    # g goes to the elements equal to the result, shared evenly among ties (as torch). The
    # extremum is taken again from `x` rather than read from the forward's `y`: when `x` is
    # recomputed in the backward (a fused cos(x), say), a kernel built with -ffast-math may round
    # it differently from the forward's kernel, and `x == y` would then find no element at all.
    def vjp_extremum(ops: GraphOps, g: Node, y: Node, x: Node, dims: tuple[int, ...], keepdim: bool = False) -> Grads:
        hits = ops.eq(x, getattr(ops, op)(x, dims, True))
        count = ops.sum(ops.convert(hits, g.meta.dtype), dims, True)
        share = ops.div(_with_reduced_dims(ops, g, x, dims, keepdim), count)
        return (ops.where(hits, share, 0.0),)

    return vjp_extremum


vjp("amax")(_extremum_vjp("amax"))
vjp("amin")(_extremum_vjp("amin"))


@vjp("prod")  # d/dx_i prod(x) = the product of the other elements
def vjp_prod(ops: GraphOps, g: Node, y: Node, x: Node, dims: tuple[int, ...], keepdim: bool = False) -> Grads:
    if x.meta.ndim == 0:  # the one element is the product
        return (g,)
    g, y = (_with_reduced_dims(ops, t, x, dims, keepdim) for t in (g, y))
    # In a row without zeros that is y / x_i (torch's formula: g * (y / x)), and 0 = y / x_i for
    # every non-zero x_i of a row with a zero. The zero itself gets the product of the others:
    # the row's product with that zero taken as 1, if it is the row's only zero, else 0.
    zero = ops.eq(x, 0)
    zeros = ops.sum(ops.convert(zero, torch.int64), dims, True)  # how many in each row
    others = ops.prod(ops.where(zero, 1.0, x), dims, True)
    at_zero = ops.where(ops.eq(zeros, 1), ops.mul(g, others), 0.0)
    return (ops.where(zero, at_zero, ops.mul(g, ops.div(y, x))),)


def _suffix_sum(ops: GraphOps, t: Node, dim: int) -> Node:
    """The sum of t_j for j >= i along dim: a cumsum from the row's end. Kernels sweep a row one way
    only, so it is written as the row's total less the cumsum before i, in float64: the subtraction's
    rounding error is of the order of the total's, far below a float32 ulp of the result."""
    wide = t if t.meta.dtype == torch.float64 else ops.convert(t, torch.float64)
    suffix = ops.add(ops.sub(ops.sum(wide, (dim,), True), ops.cumsum(wide, dim)), wide)
    return suffix if wide is t else ops.convert(suffix, t.meta.dtype)


@vjp("cumsum")  # y_j = sum of x_i for i <= j, so x_i's gradient is the sum of g_j for j >= i
def vjp_cumsum(ops: GraphOps, g: Node, y: Node, x: Node, dim: int) -> Grads:
    return (_suffix_sum(ops, g, dim),)


@vjp("cumprod")  # x_i's gradient: the sum over j >= i of g_j times y_j without its factor x_i
def vjp_cumprod(ops: GraphOps, g: Node, y: Node, x: Node, dim: int) -> Grads:
    # Before a row's first zero z that is suffix_sum(g y) / x_i (torch's formula). After z every
    # product has the factor 0 whatever x_i is: 0. At z, the products before it (the cumprod with
    # x_z taken as 1) times the sum over j >= z of g_j times the product of x_k for z < k <= j.
    zero = ops.eq(x, 0)
    zeros_so_far = ops.cumsum(ops.convert(zero, torch.int64), dim)
    before = ops.eq(zeros_so_far, 0)
    first = ops.logical_and(zero, ops.eq(zeros_so_far, 1))
    before_zero = ops.div(_suffix_sum(ops, ops.mul(g, y), dim), x)
    leading = ops.cumprod(ops.where(before, x, 1.0), dim)  # at z: the product of the x_k before it
    trailing = ops.where(before, 0.0, ops.cumprod(ops.where(ops.logical_or(before, first), 1.0, x), dim))
    at_zero = ops.mul(leading, _suffix_sum(ops, ops.mul(g, trailing), dim))
    return (ops.where(before, before_zero, ops.where(first, at_zero, 0.0)),)


# --- views -----------------------------------------------------------------------------------
@vjp("reshape")  # the gradient takes the input's shape back
def vjp_reshape(ops: GraphOps, g: Node, y: Node, x: Node, shape: tuple[int, ...]) -> Grads:
    return (ops.reshape(g, x.meta.shape),)


@vjp("permute")  # the gradient is permuted back by the inverse permutation
def vjp_permute(ops: GraphOps, g: Node, y: Node, x: Node, dims: tuple[int, ...]) -> Grads:
    dims = tuple(normalize_dim(d, x.meta.ndim) for d in dims)
    inverse = tuple(sorted(range(len(dims)), key=dims.__getitem__))
    return (ops.permute(g, inverse),)


@vjp("expand")  # every copy of an element contributes: sum over the expanded dims
def vjp_expand(ops: GraphOps, g: Node, y: Node, x: Node, shape: tuple[int, ...]) -> Grads:
    return (sum_to_size(ops, g, x.meta.shape),)


@vjp("slice")  # x[start:end:step]: g goes back to the elements taken, zeros to the rest
def vjp_slice(
    ops: GraphOps, g: Node, y: Node, x: Node, dim: int, start: Any, end: Any, step: int = 1
) -> Grads:
    # Python's rules for None, negatives and clamping (sizes may be symbolic)
    first, _, step = slice_bounds(slice(start, end, step), x.meta.shape[dim])
    count = g.meta.shape[dim]  # how many elements the slice took

    def zeros_along_dim(size: int) -> Node:
        shape = (*x.meta.shape[:dim], size, *x.meta.shape[dim + 1 :])
        return zeros(ops, shape, g.meta.dtype, g.meta.device)

    if count == 0:
        return (zeros_along_dim(x.meta.shape[dim]),)
    if step > 1:  # interleave step-1 zeros after every element: (.., n, ..) -> (.., n * step, ..)
        shape = g.meta.shape
        column = ops.reshape(g, (*shape[: dim + 1], 1, *shape[dim + 1 :]))
        gaps = zeros(ops, (*shape[: dim + 1], step - 1, *shape[dim + 1 :]), g.meta.dtype, g.meta.device)
        spread = ops.cat([column, gaps], dim + 1)  # (.., n, step, ..)
        g = ops.reshape(spread, (*shape[:dim], count * step, *shape[dim + 1 :]))
        g = ops.slice(g, dim, 0, (count - 1) * step + 1)  # drop the gaps after the last element
    after = x.meta.shape[dim] - first - g.meta.shape[dim]
    pieces = [zeros_along_dim(first)] if first else []
    pieces += [g] + ([zeros_along_dim(after)] if after else [])
    return (ops.cat(pieces, dim) if len(pieces) > 1 else g,)


# --- extern calls ----------------------------------------------------------------------------
def _transpose(ops: GraphOps, t: Node) -> Node:
    """Swap the last two dims (the matrix transpose of a batch of matrices)."""
    dims = list(range(t.meta.ndim))
    dims[-2], dims[-1] = dims[-1], dims[-2]
    return ops.permute(t, tuple(dims))


@vjp("matmul")  # d(A @ B) = g @ B^T dA + A^T @ g dB
def vjp_matmul(ops: GraphOps, g: Node, y: Node, a: Node, b: Node) -> Grads:
    # torch.matmul treats a 1-D `a` as a row (1, k) and a 1-D `b` as a column (k, 1), then
    # drops those dims from the result: do the same, and put them back into the gradients.
    a2 = ops.reshape(a, (1, *a.meta.shape)) if a.meta.ndim == 1 else a
    b2 = ops.reshape(b, (*b.meta.shape, 1)) if b.meta.ndim == 1 else b
    g_shape = list(g.meta.shape) + ([1] if b.meta.ndim == 1 else [])
    if a.meta.ndim == 1:
        g_shape.insert(len(g_shape) - 1, 1)
    g2 = ops.reshape(g, tuple(g_shape)) if tuple(g_shape) != g.meta.shape else g
    grad_a = sum_to_size(ops, ops.matmul(g2, _transpose(ops, b2)), a2.meta.shape)  # batch dims broadcast
    grad_b = sum_to_size(ops, ops.matmul(_transpose(ops, a2), g2), b2.meta.shape)
    return (
        grad_a if a2 is a else ops.reshape(grad_a, a.meta.shape),
        grad_b if b2 is b else ops.reshape(grad_b, b.meta.shape),
    )


@vjp("addmm")  # addmm(bias, A, B) = beta bias + alpha A @ B
def vjp_addmm(
    ops: GraphOps, g: Node, y: Node, bias: Node, a: Node, b: Node, beta: float = 1, alpha: float = 1
) -> Grads:
    g_bias = g if beta == 1 else ops.mul(g, beta)
    g_ab = g if alpha == 1 else ops.mul(g, alpha)
    return g_bias, ops.matmul(g_ab, _transpose(ops, b)), ops.matmul(_transpose(ops, a), g_ab)


@vjp("bmm")  # d(A @ B) = g @ B^T dA + A^T @ g dB, for each matrix of the batch
def vjp_bmm(ops: GraphOps, g: Node, y: Node, a: Node, b: Node) -> Grads:
    return ops.bmm(g, _transpose(ops, b)), ops.bmm(_transpose(ops, a), g)


@vjp("cat")  # each input gets back its own slice of g
def vjp_cat(ops: GraphOps, g: Node, y: Node, tensors: list[Node], dim: int = 0) -> Grads:
    dim = normalize_dim(dim, y.meta.ndim)
    starts = [0]
    for t in tensors:
        starts.append(starts[-1] + t.meta.shape[dim])
    return (tuple(ops.slice(g, dim, start, end) for start, end in zip(starts, starts[1:], strict=False)),)


@vjp("load_at")  # out[p] = x[indices[p]]: g[p] is added back at indices[p], none to the indices
def vjp_load_at(ops: GraphOps, g: Node, y: Node, x: Node, indices: tuple[Any, ...]) -> Grads:
    windows = y.tags.get(POOL_WINDOWS) if x.meta.device.type in pool_gradient.GATHERED_ON else None
    argmax = argmax_behind(indices) if windows is not None else None
    if argmax is not None and argmax.meta.shape == y.meta.shape:
        return pool_gradient.max_pool_input_gradient(ops, g, argmax, x, windows), None  # a gather, no atomics
    if x.meta.device.type == "cpu" and g.meta.dtype in ATOMIC_DTYPES and _whole_rows(indices, x, y):
        # an embedding: its rows added whole (low precision keeps index_add_ of elements, below,
        # which sums as eager's embedding backward does)
        return ops.torch_call(accumulate_rows, x.meta.shape, indices[0], g), None
    position = _flat_position(ops, indices, x.meta.shape)
    if g.meta.dtype not in ATOMIC_DTYPES:  # no atomic adds for it in both backends: torch's index_add_
        return ops.torch_call(accumulate_at, x.meta.shape, position, g), None
    # a generated kernel of atomic adds into zeros, which computes the positions itself
    return ops.store_at(zeros(ops, x.meta.shape, g.meta.dtype, x.meta.device), position, g, "add"), None


@vjp("store_at")
def vjp_store_at(ops: GraphOps, g: Node, y: Node, base: Node, position: Any, values: Any, combine: str) -> Grads:
    # the values' gradient is g read at their positions (a gather), none to the positions; the
    # base's is g where it survives: everywhere for add, nowhere it was overwritten for replace
    if combine in ("add", "replace"):
        g_values = ops.load_at(_flattened(ops, g), (position,)) if isinstance(values, Node) else None
        g_base = g if combine == "add" else ops.store_at(ops.clone(g), position, 0, "replace")
        return g_base, None, g_values, None
    # amax, amin: g shared evenly among the elements equal to the result there, base's and values' alike
    won = ops.eq(base, y)
    taken = ops.eq(values, ops.load_at(_flattened(ops, y), (position,)))
    count = ops.store_at(ops.convert(won, g.meta.dtype), position, ops.convert(taken, g.meta.dtype), "add")
    share = ops.div(g, ops.maximum(count, 1))
    g_values = ops.where(taken, ops.load_at(_flattened(ops, share), (position,)), 0)
    return ops.where(won, share, 0), None, g_values if isinstance(values, Node) else None, None


def _flattened(ops: GraphOps, t: Node) -> Node:
    """t as one row, to be read at flat positions: a view of its buffer, or of a copy where t is a
    view itself (an expanded gradient, which no reshape can view)."""
    return ops.reshape(ops.clone(t) if t.op in OPS and OPS[t.op].kind == "view" else t, (t.meta.numel,))


def _whole_rows(indices: tuple[Any, ...], x: Node, y: Node) -> bool:
    """Does load_at(x, indices) read whole rows of a 2-d x, y[.., j] = x[rows[..], j] (an embedding,
    decompose/gathers.py): a row number per row of y, and each row's columns in order?"""
    if x.meta.ndim != 2 or len(indices) != 2 or not all(isinstance(i, Node) for i in indices):
        return False
    rows, columns = indices
    width = x.meta.shape[1]
    if y.meta.shape[-1] != width or rows.meta.shape != (*y.meta.shape[:-1], 1):
        return False
    if columns.op == "add" and isinstance(columns.args[1], Node) and columns.args[1].op == "full" \
            and columns.args[1].args[1] == 0:
        columns = columns.args[0]  # coordinate(): the iota broadcast by adding zeros
    return columns.op == "iota" and columns.args[1] == y.meta.ndim - 1 and columns.meta.shape[-1] == width


def _flat_position(ops: GraphOps, indices: tuple[Any, ...], shape: tuple[Any, ...]) -> Any:
    """sum(i_d * stride_d) over x's dims: pointwise, so computed in the kernel that computes the
    indices, and torch gets one position tensor instead of one per dim to combine itself."""
    constant, terms = 0, []
    for index, stride in zip(indices, contiguous_strides(shape), strict=True):
        if isinstance(index, Node):
            terms.append(index if stride == 1 else ops.mul(index, stride))
        else:
            constant += index * stride
    if not terms:
        return constant
    position = functools.reduce(ops.add, terms)
    return position if constant == 0 else ops.add(position, constant)


# Functions that draw random numbers: recomputing one in the backward would draw new numbers.
RANDOM_FUNCTIONS = frozenset({
    torch.rand_like, torch.randn_like, torch.randint_like, torch.bernoulli, torch.normal, torch.poisson,
    torch.multinomial, torch.nn.functional.dropout, torch.nn.functional.dropout1d,
    torch.nn.functional.dropout2d, torch.nn.functional.dropout3d, torch.nn.functional.alpha_dropout,
})


# Convolutions: torch's own gradient functions for the input and the weight, so the backward does
# not run the forward convolution again (as the general torch_call rule below would).
CONV_GRADIENTS = {
    torch.conv1d: (torch.nn.grad.conv1d_input, torch.nn.grad.conv1d_weight),
    torch.conv2d: (torch.nn.grad.conv2d_input, torch.nn.grad.conv2d_weight),
    torch.conv3d: (torch.nn.grad.conv3d_input, torch.nn.grad.conv3d_weight),
}


def vjp_convolution(ops: GraphOps, g: Node, fn: Any, x: Node, w: Node, b: Any = None, stride: Any = 1,
                    padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Grads:
    grad_input, grad_weight = CONV_GRADIENTS[fn]
    settings = (stride, padding, dilation, groups)
    return (
        None,  # fn
        ops.torch_call(grad_input, x.meta.shape, w, g, *settings),
        ops.torch_call(grad_weight, x, w.meta.shape, g, *settings),
        ops.sum(g, tuple(d for d in range(g.meta.ndim) if d != 1), False) if isinstance(b, Node) else None,
    )


def convolution_grads(grad: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, stride: Any = 1,
                      padding: Any = 0, dilation: Any = 1, groups: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """The input's and the weight's gradients of one convolution from one call, as eager's
    ConvolutionBackward gets them: torch.nn.grad's `conv2d_input` and `conv2d_weight` make a call
    each, and a call costs a convolution backward's setup on the host again (codegen/wrapper.py
    gathers the two into this)."""
    dims = input.dim() - 2
    per_dim = [tuple(v) if isinstance(v, (tuple, list)) else (v,) * dims for v in (stride, padding, dilation)]
    grad_input, grad_weight, _ = torch.ops.aten.convolution_backward.default(
        grad, input, weight, None, *per_dim, False, [0] * dims, groups, [True, True, False])
    return grad_input, grad_weight


@vjp("torch_call")  # an op the compiler does not know: torch autograd differentiates it in the backward
def vjp_torch_call(ops: GraphOps, g: Node, y: Node, fn: Any, *args: Any, **kwargs: Any) -> Grads:
    if fn in CONV_GRADIENTS and not kwargs and not isinstance(args[4] if len(args) > 4 else 0, str):
        return vjp_convolution(ops, g, fn, *args)
    if fn in RANDOM_FUNCTIONS:
        raise NotDifferentiable("torch_call", f"{fn.__name__} is random, and its backward would draw again")
    grads = [
        ops.torch_call_vjp(fn, i, g, *args, **kwargs)
        if isinstance(arg, Node) and arg.meta.dtype.is_floating_point else None
        for i, arg in enumerate(args)
    ]
    return (None, *grads)
