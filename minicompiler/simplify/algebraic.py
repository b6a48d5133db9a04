"""Algebraic rewrite rules, tinygrad style: a list of (pattern, rewrite), each named by the
identity it applies.

A rewrite gets the pattern's variables and returns the replacement (an existing node or new
nodes built in the graph), or None to decline. Every replacement is checked before it is
kept: it must be a node with the shape and dtype of the node it replaces, else the rule is
skipped. That check is part of every rule: it is what makes `reshape(x, shape) -> x` fire
only when `shape` is x's own shape, and what keeps `x_int / 1` (a float) from becoming `x_int`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from minicompiler.ir import Graph, Node, rewrite
from minicompiler.simplify.facts import location
from minicompiler.simplify.patterns import Arg, P, Pattern, match_call


@dataclass(frozen=True)
class Rule:
    name: str  # the identity, e.g. "x*1 -> x"; the log prints it
    pattern: Pattern
    rewrite: Callable[..., Any]  # (graph, **variables) -> replacement node, or None
    # only where the node the pattern's first argument matched has no other user: else the
    # rewrite would compute it twice (a matmul, say)
    sole_use: bool = False


def _zeros_unless_float(g: Graph, x: Node) -> Node | None:
    # For floats x*0 is not 0: inf*0 and nan*0 are nan, and -1*0 is -0.0.
    if x.meta.dtype.is_floating_point or x.meta.dtype.is_complex:
        return None
    return g.call("full", x.meta.shape, 0, x.meta.dtype, x.meta.device)


def _times_reciprocal(g: Graph, x: Node, c: Any) -> Node | None:
    # Exact only for c = ±2^k with c and 1/c normal numbers in the result dtype: then x/c and
    # x*(1/c) are the same real number, rounded once. (Multiplying is cheaper than dividing.)
    if not isinstance(c, (int, float)) or isinstance(c, bool):
        return None
    dtype = x.meta.dtype if x.meta.dtype.is_floating_point else torch.get_default_dtype()
    info = torch.finfo(dtype)
    if not info.tiny <= abs(c) <= info.max or not info.tiny <= abs(1 / c) <= info.max:
        return None
    if abs(math.frexp(c)[0]) != 0.5:  # not a power of two
        return None
    return g.call("mul", x, 1 / c)


def _same_shape_and_dtype(a: Node, b: Node) -> bool:
    return (a.meta.shape, a.meta.dtype) == (b.meta.shape, b.meta.dtype)


def _is_identity(dims: Sequence[int]) -> bool:
    return all(d % len(dims) == i for i, d in enumerate(dims))


def _swaps_last_two(dims: Sequence[int]) -> bool:
    n = len(dims)
    return n >= 2 and [d % n for d in dims] == [*range(n - 2), n - 1, n - 2]


def _transposed_product(g: Graph, a: Node, b: Node, dims: Sequence[int]) -> Node | None:
    # (a @ b)^T = b^T @ a^T, for operands of the result's rank (no broadcasting). A weight's
    # gradient comes out of the VJP as (x^T @ g)^T: as g^T @ x it is contiguous, as eager's is,
    # and BLAS computes it several times faster (a wide output instead of a tall thin one).
    if not _swaps_last_two(dims) or not a.meta.ndim == b.meta.ndim == len(dims):
        return None
    return g.call("matmul", g.call("permute", b, tuple(dims)), g.call("permute", a, tuple(dims)))


def _factored_sum(g: Graph, a: Node, b: Node, dims: Sequence[int], keepdim: bool) -> Node | None:
    # sum over j, k of a[i, j] * b[i, k] = (sum over j of a[i, j]) * (sum over k of b[i, k]): where
    # each summed dim runs along one factor only (the other is broadcast there), the product is
    # never formed. Seed 001's numpy_fn sums X[:, :, None] * Y[:, None, :] over both dims: n*m*m
    # products and adds become n*2m adds and n products. The sums are in another order, as any
    # change of a reduction's order (a GPU's tree, a split reduction) puts them.
    ndim = a.meta.ndim
    if b.meta.ndim != ndim or not dims or a.meta.dtype in (torch.float16, torch.bfloat16):
        return None  # (half-precision sums would be rounded to 8-11 bits each before their product)
    summed = {d % ndim for d in dims}
    own_a = tuple(sorted(d for d in summed if a.meta.shape[d] != 1))
    own_b = tuple(sorted(d for d in summed if b.meta.shape[d] != 1))
    if set(own_a) & set(own_b) or not (own_a or own_b):
        return None
    factor_a = g.call("sum", a, own_a, True) if own_a else a
    factor_b = g.call("sum", b, own_b, True) if own_b else b
    product = g.call("mul", factor_a, factor_b)  # every summed dim now has size 1
    if keepdim:
        return product
    kept = tuple(size for d, size in enumerate(product.meta.shape) if d not in summed)
    return g.call("reshape", product, kept)


def _sum_before_unit_dims(g: Graph, x: Node, shape: Sequence[int], dims: Any, keepdim: bool) -> Node | None:
    # A sum over x[:, :, None] (a reshape that only adds or drops dims of size 1) is a sum over x's
    # own dims, reshaped: so written, it runs over x's shape, where it fuses with what computes x and
    # with other sums over those dims. Seed 001's numpy_fn sums its normalized X and Y (and their
    # squares) along each row: one kernel for the three, reading X and Y, not three over copies.
    if not isinstance(keepdim, bool) or [s for s in shape if s != 1] != [s for s in x.meta.shape if s != 1]:
        return None
    reduced = {d % len(shape) for d in ((dims,) if isinstance(dims, int) else dims)}
    own = iter(d for d, size in enumerate(x.meta.shape) if size != 1)
    of_x = {d: next(own) for d, size in enumerate(shape) if size != 1}  # x's dim for each of `shape`'s not 1
    summed = tuple(sorted(of_x[d] for d in reduced if d in of_x))
    if not summed:
        return None
    kept = [1 if d in reduced else size for d, size in enumerate(shape)]
    out = kept if keepdim else [size for d, size in enumerate(shape) if d not in reduced]
    return g.call("reshape", g.call("sum", x, summed, True), tuple(out))


def _positions_in_range(g: Graph, x: Node, low: Any, high: Any) -> Node | None:
    # x viewed from an iota (positions 0 .. n-1: `torch.arange(seq)` as a position embedding's
    # indices) holds only those values; a check of them is four launches for nothing
    source = x
    while isinstance(source, Node) and source.op in ("reshape", "permute", "expand", "slice", "detach"):
        source = source.args[0]
    if not isinstance(source, Node) or source.op != "iota":
        return None
    shape, dim = source.args[0], source.args[1]
    count = shape[dim]
    in_range = isinstance(count, int) and isinstance(low, int) and isinstance(high, int) and low <= 0 and count <= high
    return x if in_range else None


def _zero_fill(node: Any) -> bool:
    return isinstance(node, Node) and node.op == "full" and node.args[1] == 0


def _cat_pieces(node: Node) -> tuple[int, list[tuple[int, int, Node]]] | None:
    """(dim, [(start, end, piece)]) of a cat along one dim whose pieces' sizes are known now."""
    if node.op != "cat" or node.kwargs:
        return None
    tensors, dim = node.args[0], node.args[1] % node.meta.ndim if len(node.args) > 1 else 0
    pieces, start = [], 0
    for piece in tensors:
        size = piece.meta.shape[dim]
        if not isinstance(size, int):
            return None
        pieces.append((start, start + size, piece))
        start += size
    return dim, pieces


def _merged_cats(g: Graph, a: Node, b: Node) -> Node | None:
    # A gradient of x[0], x[1], x[2] (q, k, v = qkv.unbind()) is three cats of one piece each
    # among zeros, added up: cat([g0, 0]) + cat([0, g1, 0]) + cat([0, g2]). Where no place has a
    # non-zero piece in both cats, the sum is one cat of the pieces (exact: x + 0 is x, but for the
    # sign of a zero), and there are no zero fills and no adds: cat([g0, g1, g2]).
    found_a, found_b = _cat_pieces(a), _cat_pieces(b)
    if found_a is None or found_b is None or found_a[0] != found_b[0] or a.meta.shape != b.meta.shape:
        return None
    dim = found_a[0]
    nonzero = sorted(((start, end, piece) for start, end, piece in (*found_a[1], *found_b[1])
                      if not _zero_fill(piece)), key=lambda found: found[:2])
    if any(later[0] < earlier[1] for earlier, later in zip(nonzero, nonzero[1:], strict=False)):
        return None  # two non-zero pieces overlap: their sum is an add after all
    pieces, at = [], 0
    for start, end, piece in [*nonzero, (a.meta.shape[dim], None, None)]:
        if start > at:  # a gap: zeros there in both cats
            shape = (*a.meta.shape[:dim], start - at, *a.meta.shape[dim + 1:])
            pieces.append(g.call("full", shape, 0.0, a.meta.dtype, device=str(a.meta.device)))
        if piece is not None:
            pieces.append(piece)
            at = end
    return g.call("cat", pieces, dim) if len(pieces) > 1 else pieces[0]


def _cat_of_permutes(g: Graph, tensors: Any, dim: int, dims: Sequence[int], shape: Sequence[int]) -> Node | None:
    # permute(cat(xs, d), p) is cat(permute(x, p) for x in xs) along d's new place. A transformer's
    # qkv gradient is cat([g_q, g_k, g_v]) of shape (3, B, H, S, D), permuted to (B, S, 3, H, D) and
    # reshaped to the projection's (B*S, 3*H*D): a copy of the permuted cat. Permuted first, the cat
    # is written in that order and the reshape is a view of it. Only where the reshape copies: a
    # cat of permuted (strided) pieces may cost torch more than one of row-major pieces.
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Node) for t in tensors):
        return None
    if not all(isinstance(size, int) for t in tensors for size in t.meta.shape):
        return None  # symbolic sizes: asking whether the reshape is a view would specialize them
    cat_shape = list(tensors[0].meta.shape)
    cat_shape[dim] = sum(t.meta.shape[dim] for t in tensors)
    try:
        torch.empty(cat_shape, device="meta").permute(tuple(dims)).view(tuple(shape))
        return None  # a view already
    except RuntimeError:
        pass
    at = list(dims).index(dim % len(dims))
    return g.call("reshape", g.call("cat", [g.call("permute", t, tuple(dims)) for t in tensors], at), tuple(shape))


RULES: list[Rule] = [
    Rule("x*1 -> x", P("mul", "x", 1), lambda g, x: x),
    # -0.0 + 0 is +0.0, so only the sign of a zero can differ
    Rule("x+0 -> x", P("add", "x", 0), lambda g, x: x),
    Rule("x-0 -> x", P("sub", "x", 0), lambda g, x: x),
    Rule("x/1 -> x", P("div", "x", 1), lambda g, x: x),
    Rule("x*0 -> zeros (not for floats)", P("mul", "x", 0), _zeros_unless_float),
    Rule("x/c -> x*(1/c) for c a power of 2", P("div", "x", Arg("c")), _times_reciprocal),
    Rule("x**1 -> x", P("pow", "x", 1), lambda g, x: x),
    Rule("x**2 -> x*x", P("pow", "x", 2), lambda g, x: g.call("mul", x, x)),
    Rule("x**0.5 -> sqrt(x)", P("pow", "x", 0.5), lambda g, x: g.call("sqrt", x)),
    Rule("neg(neg(x)) -> x", P("neg", P("neg", "x")), lambda g, x: x),
    # exact only for x > 0 (for x < 0, log gives nan); torch.compile rewrites it the same way
    Rule("exp(log(x)) -> x", P("exp", P("log", "x")), lambda g, x: x),
    # the dtype check above makes these two fire only for a no-op convert / reshape
    Rule("convert(x, same dtype) -> x", P("convert", "x", Arg("dtype")), lambda g, x, dtype: x),
    Rule("reshape to same shape -> x", P("reshape", "x", Arg("shape")), lambda g, x, shape: x),
    Rule("expand to same shape -> x", P("expand", "x", Arg("shape")), lambda g, x, shape: x),
    Rule(
        "reshape(reshape(x)) -> reshape",
        P("reshape", P("reshape", "x", Arg("inner")), Arg("shape")),
        lambda g, x, inner, shape: g.call("reshape", x, shape),
    ),
    # the shape check is not enough here: permute(x, (1, 0)) keeps the shape of a square x
    Rule(
        "permute identity -> x",
        P("permute", "x", Arg("dims")),
        lambda g, x, dims: x if _is_identity(dims) else None,
    ),
    # permute(permute(x, p), q) -> permute(x, p∘q): dim i of the result is dim p[q[i]] of x
    Rule(
        "permute(permute(x)) -> one permute",
        P("permute", P("permute", "x", Arg("p")), Arg("q")),
        lambda g, x, p, q: g.call("permute", x, tuple(p[i] for i in q)),
    ),
    Rule("permute(a @ b) -> permute(b) @ permute(a)", P("permute", P("matmul", "a", "b"), Arg("dims")),
         _transposed_product, sole_use=True),
    Rule("sum(a*b) -> sum(a)*sum(b) where each summed dim is one factor's",
         P("sum", P("mul", "a", "b"), Arg("dims"), Arg("keepdim")), _factored_sum, sole_use=True),
    Rule("sum(reshape(x) adding dims of size 1) -> reshape(sum(x))",
         P("sum", P("reshape", "x", Arg("shape")), Arg("dims"), Arg("keepdim")), _sum_before_unit_dims),
    Rule("cat(..., a, 0, ...) + cat(..., 0, b, ...) -> cat(..., a, b, ...)", P("add", "a", "b"), _merged_cats),
    Rule("reshape(permute(cat(xs))) -> reshape(cat(permute(x) for x in xs))",
         P("reshape", P("permute", P("cat", Arg("tensors"), Arg("dim")), Arg("dims")), Arg("shape")),
         _cat_of_permutes, sole_use=True),
    Rule("check_indices(positions 0..n-1 within bounds) -> positions",
         P("check_indices", "x", Arg("low"), Arg("high")), _positions_in_range),
]


def _sole_use(node: Node, users: dict[Node, list[Node]]) -> bool:
    """Is `node` the only reader of its first argument (a node)?"""
    first = node.args[0] if node.args else None
    return isinstance(first, Node) and len(users[first]) == 1


def apply_algebraic_rules(graph: Graph, log: list[str] | None = None, rules: Sequence[Rule] = RULES) -> Graph:
    """A new graph where each node matching a rule is replaced by the rule's rewrite."""

    users = graph.users()

    def rule(new: Graph, node: Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Node | None:
        if kwargs:  # patterns match positional arguments only
            return None
        for candidate in rules:
            if candidate.sole_use and not _sole_use(node, users):
                continue
            variables = match_call(candidate.pattern, node.op, args, {})
            if variables is None:
                continue
            first_new = len(new.nodes)
            result = candidate.rewrite(new, **variables)
            if isinstance(result, Node) and _same_shape_and_dtype(result, node):
                for made in new.nodes[first_new:]:
                    made.tags.update(node.tags)
                if log is not None:
                    log.append(f"algebraic: %{node.name}: {candidate.name}{location(node)}")
                return result
            del new.nodes[first_new:]  # take back the nodes of a declined rewrite
        return None

    return rewrite(graph, rule)
