"""What both backends share: the `ops` handler base, values, dtypes and index arithmetic.

A kernel body is written once (`codegen/body.py`) as calls on an `ops` handler:
`ops.load(param, dtype, index, level)`, `ops.cos(x)`, `ops.add(a, b)`, `ops.store(...)`,
`ops.reduction_update(acc, op, value)`. The handler turns each call into one line of its
language and returns a `Value` naming the result. `CppOps` and `TritonOps` are two such handlers: the same
calls give `float tmp1 = std::cos(tmp0);` or `tmp1 = tl.cos(tmp0)`.
"""

from __future__ import annotations

import abc
import contextlib
import itertools
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch

from minicompiler.codegen.sizes import Extent, KernelSizes, index_terms, render_index
from minicompiler.fuse.schedule import Kernel
from minicompiler.ir.graph import Node, TensorMeta
from minicompiler.ir.ops import PREDICATES
from minicompiler.ir.printer import format_value

Level = Literal["element", "row"]  # per element of the domain, or once per row of a reduction
LOW_PRECISION = (torch.float16, torch.bfloat16)
LOGICAL = frozenset({"logical_and", "logical_or", "logical_not"})
WORD = re.compile(r"\w+")  # what `\b{name}\b` matches a name as


class CodegenError(ValueError):
    """The schedule asks for something a backend cannot generate (a dtype, a device, ...)."""


def helpers_used(helpers: str, separator: str, definition: re.Pattern[str], code: str) -> list[str]:
    """The helpers (the chunks of `helpers` between separators) that `code` calls by a name some
    chunk defines, with the helpers those call: a module carries only what its kernels use. A
    chunk calls only chunks above it, so one pass from the bottom up finds them all."""
    used, words = [], set(WORD.findall(code))  # a set of the words once: a search per name took ~1 ms
    for chunk in reversed(helpers.strip().split(separator)):
        if any(name in words for name in definition.findall(chunk)):
            used.append(chunk)
            words.update(WORD.findall(chunk))
    return used[::-1]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype arithmetic runs in: float16/bfloat16 are loaded, computed in float32, stored back."""
    return torch.float32 if dtype in LOW_PRECISION else dtype


def python_value(value: Any, dtype: torch.dtype) -> bool | int | float:
    """A Python number converted as torch converts it to `dtype` (integers wrap around)."""
    if dtype == torch.bool:
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    return int(torch.tensor(value).to(dtype).item())


@dataclass(frozen=True)
class Value:
    """A value in generated code: the text that names it, its compute dtype, and whether it
    is a literal constant (Triton needs to know: `tl.cos(0.5)` is not valid, `x + 0.5` is)."""

    text: str
    dtype: torch.dtype
    constant: bool = False

    def __str__(self) -> str:
        return self.text


class CodeWriter:
    """Lines of code, each remembering the graph nodes it was written for (its provenance)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.origins: list[tuple[Node, ...]] = []
        self._indent = 0
        self._origin: tuple[Node, ...] = ()

    def line(self, text: str) -> None:
        self.lines.append("    " * self._indent + text if text else "")
        self.origins.append(self._origin)

    def extend(self, other: CodeWriter) -> None:
        """Append `other`'s lines (with their provenance) at this writer's indentation."""
        for text, origin in zip(other.lines, other.origins, strict=True):
            with self.origin(*origin):
                self.line(text)

    @contextlib.contextmanager
    def indent(self) -> Iterator[None]:
        self._indent += 1
        try:
            yield
        finally:
            self._indent -= 1

    @contextlib.contextmanager
    def origin(self, *nodes: Node) -> Iterator[None]:
        saved, self._origin = self._origin, nodes
        try:
            yield
        finally:
            self._origin = saved


def provenance_comment(node: Node) -> str:
    """`cos_1 = cos(cos)  <- user.py:4  b = torch.cos(a)`: a node and the user line it came from."""
    args = [format_value(a) for a in node.args] + [f"{k}={format_value(v)}" for k, v in node.kwargs.items()]
    text = f"{node.name} = {node.op}({', '.join(args)})"
    if node.source is not None:
        text += f"  <- {node.source.filename.rsplit('/', 1)[-1]}:{node.source.lineno}"
        if node.source.line:
            text += f"  {node.source.line}"
    # a C++ comment that ends in a backslash continues onto the next line (`y = a + \`),
    # and a control character in a user's line is better shown than obeyed
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text.rstrip("\\ ")


# -- the ops handler ----------------------------------------------------------------------
class KernelOps(abc.ABC):
    """Base of the backends' `ops` handlers: temporaries, lines and their provenance.

    `ops.cos(x)`, `ops.add(a, b)`, ... are spelled by the backend's `templates` (format
    strings over the operands; `{t}` is the result's type name). A subclass also says how to
    write constants, casts, loads, stores and the reduction accumulators."""

    templates: ClassVar[dict[str, str]]
    row_cache_limit: ClassVar[int] = 0  # bytes of element values a row may keep between sweeps
    # Whether a float32 sum adds up in float64. A CPU loop adds a row's elements one after another
    # (a few SIMD lanes at a time): in float32 the rounding grows with the row, and a batch norm's
    # statistics of a channel that is nearly constant lost the digits its gradient needs
    # (MobileNetV3 training, C++: gradients 1e-3 from float64's, eager's 1e-6). Eager's CPU kernels
    # accumulate float32 in double too. A GPU's sums are trees of short partial sums: float32 holds.
    sums_in_float64: ClassVar[bool] = False
    floordiv: ClassVar[str]  # integer division in index expressions
    xvar: ClassVar[str]  # the loop index over rows (or over all elements, pointwise)
    rvar: ClassVar[str]  # the loop index over the reduced dims

    def __init__(self, kernel: Kernel, dynamic: bool = False) -> None:
        self.kernel = kernel
        self.sizes = KernelSizes(kernel, dynamic)
        self.writer = CodeWriter()
        self._names = itertools.count()

    def __getattr__(self, op: str) -> Callable[..., Value]:
        # ops.cos(x), ops.add(a, b), ...: one method per pointwise op of the op table
        if op in type(self).templates:
            return lambda *args: self.pointwise(op, *args)
        raise AttributeError(f"{type(self).__name__} has no op {op!r}")

    def pointwise(self, op: str, *args: Value) -> Value:
        if op in PREDICATES or op in LOGICAL:
            dtype = torch.bool
        else:
            dtype = args[1].dtype if op == "where" else args[0].dtype
        return self.assign(self.templates[op].format(*args, t=self.type_name(dtype)), dtype)

    def assign(self, expr: str, dtype: torch.dtype) -> Value:
        name = f"tmp{next(self._names)}"
        self.writer.line(self.declaration(name, expr, dtype))
        return Value(name, dtype)

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self._names)}"

    def index(self, param: str, meta: TensorMeta, level: Level, shape: tuple[int, ...]) -> str:
        """Offset of the element of buffer `param` (`meta`), broadcast to `shape`, that the loop is at.

        Element level: `shape` is the domain; the kept dims are numbered by the row index, the
        reduced dims by the index of the sweep over them. Row level: `shape` is the reduced
        shape, with or without the folded dims as 1s; only the row index moves."""
        kernel, sizes, kept = self.kernel, self.sizes, self.kernel.kept_dims
        strides = sizes.strides(meta, shape, param)
        if kernel.kind == "pointwise":  # the row index walks the domain in its loop order
            walk = kernel.loop_order
            terms = index_terms(tuple(sizes.domain[d] for d in walk), tuple(strides[d] for d in walk))
            return render_index(self.xvar, terms, self.floordiv)
        # the row index walks the kept dims in the kernel's row order
        rows = kernel.row_order
        row_sizes = tuple(sizes.reduced_shape[i] for i in rows)
        if level == "row":
            if len(shape) == len(kernel.domain):  # keepdim shape: skip the folded dims
                strides = tuple(strides[d] for d in kept)
            return render_index(self.xvar, index_terms(row_sizes, tuple(strides[i] for i in rows)), self.floordiv)
        dims = kernel.reduction_dims
        outer = index_terms(row_sizes, tuple(strides[kept[i]] for i in rows))
        inner = self.reduced_index(tuple(sizes.domain[d] for d in dims), tuple(strides[d] for d in dims))
        parts = [render_index(self.xvar, outer, self.floordiv)] if outer else []
        parts += [inner] if inner else []
        return " + ".join(parts) or "0"

    def reduced_index(self, sizes: tuple[Extent, ...], strides: tuple[Extent, ...]) -> str | None:
        """The offset along the reduced dims, at the sweep's position (None: it does not move)."""
        terms = index_terms(sizes, strides)
        return render_index(self.rvar, terms, self.floordiv) if terms else None

    # -- what each backend spells ----------------------------------------------------------
    @abc.abstractmethod
    def type_name(self, dtype: torch.dtype) -> str: ...

    @abc.abstractmethod
    def declaration(self, name: str, expr: str, dtype: torch.dtype) -> str: ...

    @abc.abstractmethod
    def constant(self, value: bool | int | float, dtype: torch.dtype) -> Value: ...

    @abc.abstractmethod
    def size_value(self, text: str, dtype: torch.dtype) -> Value:
        """An expression of the kernel's size arguments (a symbolic size), as a value of `dtype`."""

    @abc.abstractmethod
    def to_dtype(self, x: Value, dtype: torch.dtype) -> Value: ...

    @abc.abstractmethod
    def round_to(self, x: Value, dtype: torch.dtype) -> Value:
        """Round a float32 value to float16/bfloat16 precision (it stays float32)."""

    def index_value(self, index: str, dtype: torch.dtype) -> Value:
        """An index expression (an iota's value) as a value of `dtype`."""
        if index.isdigit():
            return self.constant(python_value(int(index), dtype), dtype)
        return self.to_dtype(self.assign(index, torch.int64), dtype)

    @abc.abstractmethod
    def load(self, param: str, dtype: torch.dtype, index: str, level: Level, gathered: bool = False) -> Value:
        """Read element `index` of the buffer passed as `param` (of `dtype`), in compute dtype.
        `gathered`: `index` is computed from values (load_at), not from the loop indices."""

    @abc.abstractmethod
    def store(self, param: str, dtype: torch.dtype, index: str, value: Value, level: Level) -> None: ...

    @abc.abstractmethod
    def store_at(self, param: str, dtype: torch.dtype, offset: Value, value: Value, combine: str) -> None:
        """Combine `value` into element `offset` (a computed value) of the output `param` (store_at:
        combine is 'replace', 'add', 'amax' or 'amin'; other elements of the loop may hit it too)."""

    @abc.abstractmethod
    def reduction_init(self, op: str, dtype: torch.dtype) -> str:
        """Declare an accumulator before a sweep over the reduced dims; returns its name."""

    @abc.abstractmethod
    def reduction_update(self, acc: str, op: str, value: Value) -> None: ...

    @abc.abstractmethod
    def reduction_result(self, acc: str, op: str, dtype: torch.dtype) -> Value: ...

    @abc.abstractmethod
    def scan_init(self, op: str, dtype: torch.dtype) -> str:
        """Declare a scan's running value (of `dtype`) before a sweep; returns its name."""

    @abc.abstractmethod
    def scan_update(self, acc: str, op: str, value: Value, dtype: torch.dtype) -> Value:
        """Fold the element `value` into the running value; the scan's result there (of `dtype`)."""

    @abc.abstractmethod
    def sweep(self, accumulators: list[tuple[str, str]]) -> contextlib.AbstractContextManager[None]:
        """The loop over the reduced dims of one row; `accumulators` are (name, op) pairs."""

    # A row cache (only where `row_cache_limit` is set): an array per node, one entry per element
    # of the row, written in the sweep that computes the node and read in later ones.
    def declare_row_cache(self, node: Node) -> None:
        raise NotImplementedError(f"{type(self).__name__} keeps no row cache")

    def write_row_cache(self, node: Node, value: Value) -> None:
        raise NotImplementedError(f"{type(self).__name__} keeps no row cache")

    def read_row_cache(self, node: Node) -> Value:
        raise NotImplementedError(f"{type(self).__name__} keeps no row cache")


def reduction_identity(op: str, dtype: torch.dtype) -> bool | int | float:
    """Where an accumulator starts: 0 for sum, 1 for prod, the lowest value for amax (and the
    value argmax compares), the highest for amin (and argmin's)."""
    if op in ("sum", "prod"):
        return python_value(int(op == "prod"), dtype)
    op = {"argmax": "amax", "argmin": "amin"}.get(op, op)
    if dtype == torch.bool:
        return op == "amin"
    if dtype.is_floating_point:
        return -math.inf if op == "amax" else math.inf
    info = torch.iinfo(dtype)
    return info.min if op == "amax" else info.max
