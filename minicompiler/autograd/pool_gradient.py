"""A max pool's input gradient as a gather: each element of x sums the gradients of the windows
whose maximum it is.

A max pool reads each window's value from x at its argmax (decompose/pooling.py). Autograd's rule
for any read (`load_at`) sends the gradient back by adding each window's gradient into zeros at the
position it read: a scatter, one atomic add per window into memory that neighbouring windows share
(a maximum in the overlap of two windows gets two). On the H100 that took twice eager's time for
ResNet's stem pool (0.44 against 0.22 ms), and on the CPU it visits every window's place.

Eager instead loops over the input: for element h of x, the windows that hold it are those that
start at most one window span before it,

    o * stride - pad  <=  h  <=  o * stride - pad + (kernel - 1) * dilation,

at most (kernel - 1) * dilation // stride + 1 of them along each dim (two for a 3x3, stride-2 pool:
four in 2-d). In window o, h is tap t = h + pad - o * stride (every dilation-th place is one), and
h's gradient is the sum of the gradients of the windows whose argmax is that tap:

    grad_x[h] = sum over candidate windows o of   g[o]  where argmax[o] == tap of h in o   (else 0)

One pointwise kernel over x, a few reads of g and of the argmax (which the forward saves) per
element, no atomics, and it fuses with what reads the gradient next (the ReLU before the pool). It
sends each window's gradient where the scatter does, so both give the same sums (in another order
where a tie makes one element the maximum of two windows). Only the pools of `max_pool` have these
regular windows: adaptive ones (windows of varying length) keep the scatter.

On the CPU the scatter stays: there each window adds its gradient in turn without atomics, and the
gather's index arithmetic per element (about 90 integer operations for a 3x3 pool, which do not
vectorize) made ResNet's stem pool's forward and backward 2x slower than the scatter (47 against
23 ms for 16x64x56x56 on the 2-core CI machine; eager 11 ms).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

import torch

from minicompiler.autograd.vjp import GraphOps
from minicompiler.decompose.gathers import clamp, coordinates, ravel
from minicompiler.decompose.pooling import opmath
from minicompiler.ir import Node

# (kernel, stride, padding, dilation), each per spatial dim
Windows = tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[int]]
# The devices whose max pools' gradients gather (see above). On the H200 the gather's kernel once
# gave wrong gradients where it summed a bias gradient too: Triton 3.6 miscompiled its masked loads
# at computed offsets; codegen/triton.py `load` now reads them unmasked from safe offsets.
GATHERED_ON = frozenset({"cuda"})


def max_pool_input_gradient(ops: GraphOps, g: Node, argmax: Node, x: Node, windows: Windows) -> Node:
    """x's gradient where window w's gradient `g[w]` goes to its tap number `argmax[w]`."""
    kernel, stride, padding, dilation = windows
    batch = x.meta.ndim - len(kernel)
    index = coordinates(ops, x.meta.shape, x.meta.device)
    # per spatial dim, the candidate windows of each element: (window, its tap there, whether real)
    geometry = zip(g.meta.shape[batch:], kernel, stride, padding, dilation, strict=True)
    candidates = [_candidates(ops, index[batch + d], *sizes) for d, sizes in enumerate(geometry)]
    # as eager sums: its CUDA kernel in float32 for float16, its CPU kernel in the gradient's dtype
    accumulate = opmath(g.meta.dtype) if x.meta.device.type == "cuda" else g.meta.dtype
    total = None
    for combination in itertools.product(*candidates):  # first window first, as eager adds them
        windows_at, taps, real = zip(*combination, strict=True)
        inside = functools.reduce(ops.logical_and, real)
        at = (*index[:batch], *windows_at)
        mine = ops.logical_and(inside, ops.eq(ops.load_at(argmax, at), ravel(ops, taps, kernel)))
        term = ops.where(mine, ops.convert(ops.load_at(g, at), accumulate), 0)
        total = term if total is None else ops.add(total, term)
    assert total is not None
    return ops.convert(total, g.meta.dtype)


def _candidates(ops: GraphOps, h: Node, out: int, kernel: int, stride: int, padding: int,
                dilation: int) -> list[tuple[Node, Node, Node]]:
    """Along one dim, for element h: each window that may hold it, first one first, as (that
    window's index, clamped to the windows there are; h's tap number in it; whether h really is
    one of its taps)."""
    shifted = ops.add(h, padding)
    # (h + padding) // stride: the quotient of a multiple of the stride, exact in float32 for
    # any coordinate below 2**24 (the op table has no integer division)
    last = ops.convert(ops.div(ops.convert(ops.sub(shifted, ops.remainder(shifted, stride)), torch.float32),
                               stride), torch.int64)
    found = []
    for back in range((kernel - 1) * dilation // stride, -1, -1):
        o = ops.sub(last, back) if back else last
        tap = ops.sub(shifted, ops.mul(o, stride))  # >= 0, as o * stride <= h + padding
        real = ops.logical_and(ops.ge(o, 0), ops.logical_and(ops.lt(o, out), ops.le(tap, (kernel - 1) * dilation)))
        if dilation > 1:  # between two taps of a dilated window: not one of its elements
            real = ops.logical_and(real, ops.eq(ops.remainder(tap, dilation), 0))
            tap = ops.convert(ops.div(ops.convert(tap, torch.float32), dilation), torch.int64)
        found.append((clamp(ops, o, 0, out - 1), tap, real))
    return found
