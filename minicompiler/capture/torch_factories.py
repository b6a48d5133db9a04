"""Lowerings for new tensors: constants (zeros, ones, full, fill, x.new_zeros, ...) and ranges
(arange, linspace, logspace, eye).

A constant is one `full` node and a range is a formula of `iota` (an element's index along one
dim): a kernel computes both where it reads them, from its loop counters, so neither is ever
loaded from memory. Same conventions as `torch_ops.py`; a range with a tensor bound stays whole.
"""

from __future__ import annotations

from typing import Any

import torch

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.torch_ops import InPlace, Lowering, extern, lowers
from minicompiler.ir import Graph, Node
from minicompiler.ir.symbolic import SymSize


# --- constants -----------------------------------------------------------------------------
def _size(size: tuple[Any, ...]) -> tuple[int, ...]:
    """zeros(2, 3) and zeros((2, 3)) alike."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(s if isinstance(s, SymSize) else int(s) for s in size)  # symbolic sizes stay symbols


def _device(device: Any) -> torch.device:
    return torch.device(device or torch.get_default_device())


def _full(g: Graph, shape: tuple[int, ...], value: Any, dtype: Any, device: Any) -> Node:
    if dtype is None:  # torch infers it from the fill value: 1 -> int64, 1.0 -> float32
        dtype = torch.full((), value, device="meta").dtype
    return g.call("full", shape, value, dtype, device=_device(device))


def _no_grad(requires_grad: bool) -> None:
    if requires_grad:
        raise Unsupported("creating a tensor with requires_grad=True inside the function")


def _factory(value: Any) -> Lowering:
    def lowering(g: Graph, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
                 layout: Any = None, pin_memory: bool = False) -> Node:
        _no_grad(requires_grad)
        return _full(g, _size(size), value, dtype or torch.get_default_dtype(), device)

    return lowering


def _factory_like(value: Any) -> Lowering:
    def lowering(g: Graph, x: Node, *, dtype: Any = None, device: Any = None, requires_grad: bool = False,
                 layout: Any = None, pin_memory: bool = False, memory_format: Any = None) -> Node:
        _no_grad(requires_grad)
        return _full(g, x.meta.shape, value, dtype or x.meta.dtype, device or x.meta.device)

    return lowering


def _factory_new(value: Any) -> Lowering:
    """x.new_zeros(size): a new tensor of x's dtype and device (not of its values or shape)."""
    def lowering(g: Graph, x: Node, *size: Any, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False, layout: Any = None, pin_memory: bool = False) -> Node:
        _no_grad(requires_grad)
        return _full(g, _size(size), value, dtype or x.meta.dtype, device or x.meta.device)

    return lowering


lowers(torch.zeros)(_factory(0))
lowers(torch.empty)(_factory(0))  # any value is a correct `empty`; zeros keeps runs reproducible
lowers(torch.ones)(_factory(1))
lowers(torch.zeros_like, torch.empty_like)(_factory_like(0))
lowers(torch.ones_like)(_factory_like(1))
lowers(methods=["new_zeros", "new_empty"])(_factory_new(0))
lowers(methods=["new_ones"])(_factory_new(1))
lowers(torch.zero_, methods=["zero_"])(lambda g, x: InPlace(_full(g, x.meta.shape, 0, x.meta.dtype, x.meta.device)))
lowers(torch.full)(lambda g, size, fill_value, *, dtype=None, device=None: _full(
    g, _size((size,)), fill_value, dtype, device))
lowers(torch.full_like)(lambda g, x, fill_value, *, dtype=None, device=None: _full(
    g, x.meta.shape, fill_value, dtype or x.meta.dtype, device or x.meta.device))
lowers(methods=["new_full"])(lambda g, x, size, fill_value, *, dtype=None, device=None, requires_grad=False,
                             layout=None, pin_memory=False: _factory_new(fill_value)(
    g, x, size, dtype=dtype, device=device, requires_grad=requires_grad))
lowers(torch.scalar_tensor)(lambda g, s, *, dtype=None, device=None, requires_grad=False, layout=None,
                            pin_memory=False: _factory(s)(g, (), dtype=dtype, device=device,
                                                          requires_grad=requires_grad))


@lowers(torch.fill, methods=["fill"])  # and x.fill_(value), in place
def fill(g: Graph, x: Node, value: Any) -> Node:
    if not isinstance(value, Node):
        return _full(g, x.meta.shape, value, x.meta.dtype, x.meta.device)
    # a 0-d tensor's value everywhere (its gradient is the sum of x's)
    return g.call("expand", g.call("convert", value, x.meta.dtype), x.meta.shape)


# --- ranges: formulas of an element's index --------------------------------------------------
def _index(g: Graph, size: int, dtype: torch.dtype, device: Any) -> Node:
    """0, 1, ..., size - 1 as `dtype`."""
    return g.call("convert", g.call("iota", (size,), 0, torch.int64, _device(device)), dtype)


def _is_number(*values: Any) -> bool:
    return all(isinstance(v, int | float) for v in values)  # (bools too: arange(False, True))


@lowers(torch.arange)
def arange(g: Graph, start: Any, end: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None,
           requires_grad: bool = False, layout: Any = None, pin_memory: bool = False, out: Any = None) -> Node:
    given = (start,) if end is None else (start, end) if step == 1 else (start, end, step)  # as the user wrote
    start, end = (0, start) if end is None else (start, end)
    kept_whole = out is not None or not _is_number(start, end, step)  # (a symbolic size: symbolic_shapes.py)
    result = None if kept_whole else torch.arange(start, end, step, dtype=dtype, device="meta")  # size, dtype
    if kept_whole or not result.dtype.is_floating_point and not all(isinstance(v, int) for v in (start, step)):
        return extern(g, torch.arange, *given, dtype=dtype, device=device, requires_grad=requires_grad, out=out)
    _no_grad(requires_grad)
    # start + i * step, in float64 for a floating result, as torch's CPU kernel computes it
    wide = torch.float64 if result.dtype.is_floating_point else torch.int64
    values = g.call("add", g.call("mul", _index(g, result.shape[0], wide, device), step), start)
    return g.call("convert", values, result.dtype)


def _linspace(g: Graph, start: float, end: float, steps: int, device: Any) -> Node:
    """`steps` evenly spaced float64 values from start to end; the second half counted back from
    end, as torch does, so that the last value is exactly `end`."""
    if steps == 1:
        return _full(g, (1,), float(start), torch.float64, device)
    step = (end - start) / (steps - 1)
    i = _index(g, steps, torch.float64, device)
    from_start = g.call("add", g.call("mul", i, step), start)
    from_end = g.call("sub", end, g.call("mul", g.call("sub", steps - 1, i), step))
    return g.call("where", g.call("lt", i, steps // 2), from_start, from_end)


@lowers(torch.linspace)
def linspace(g: Graph, start: Any, end: Any, steps: int, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False, layout: Any = None, pin_memory: bool = False, out: Any = None) -> Node:
    dtype = dtype or torch.get_default_dtype()
    if out is not None or not _is_number(start, end, steps) or not dtype.is_floating_point:
        return extern(g, torch.linspace, start, end, steps, dtype=dtype, device=device,
                      requires_grad=requires_grad, out=out)
    _no_grad(requires_grad)
    return g.call("convert", _linspace(g, start, end, steps, device), dtype)


@lowers(torch.logspace)
def logspace(g: Graph, start: Any, end: Any, steps: int, base: float = 10.0, *, dtype: Any = None,
             device: Any = None, requires_grad: bool = False, layout: Any = None, pin_memory: bool = False,
             out: Any = None) -> Node:
    dtype = dtype or torch.get_default_dtype()
    if out is not None or not _is_number(start, end, steps, base) or not dtype.is_floating_point:
        return extern(g, torch.logspace, start, end, steps, base, dtype=dtype, device=device,
                      requires_grad=requires_grad, out=out)
    _no_grad(requires_grad)
    # base ** linspace(start, end, steps)
    return g.call("convert", g.call("pow", float(base), _linspace(g, start, end, steps, device)), dtype)


@lowers(torch.eye)
def eye(g: Graph, n: int, m: int | None = None, *, dtype: Any = None, device: Any = None,
        requires_grad: bool = False, layout: Any = None, pin_memory: bool = False, out: Any = None) -> Node:
    m = n if m is None else m
    if out is not None or not _is_number(n, m):
        return extern(g, torch.eye, n, m, dtype=dtype, device=device, requires_grad=requires_grad, out=out)
    _no_grad(requires_grad)
    # 1 where the row index equals the column index
    row = g.call("iota", (n, 1), 0, torch.int64, _device(device))
    col = g.call("iota", (1, m), 1, torch.int64, _device(device))
    return g.call("convert", g.call("eq", row, col), dtype or torch.get_default_dtype())
