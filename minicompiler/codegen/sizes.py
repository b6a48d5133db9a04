"""Sizes, strides and index arithmetic in generated code: numbers baked in, or runtime arguments.

A static kernel has its sizes written into its text (`x < 4194304`). A shape-generic (dynamic)
kernel names them and takes them as arguments (`x < size0 * size1`), so that one text, and so
one compiled library or one Triton JIT entry, serves every size of the same pattern:

    rank, dtypes, reduction dims   baked in
    dims of size 1                 baked in (Dynamo's "0/1 specialization"): whether a dim is 1
                                   decides broadcasting, and so the shape of the index arithmetic
    other sizes                    arguments size0, size1, ... (one per dim of the domain)
    strides of contiguous buffers  products of those sizes, computed in the kernel
    strides of strided buffers     arguments in_x_stride0, ... (transposed or sliced inputs)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from minicompiler.fuse.schedule import Kernel
from minicompiler.ir.graph import Node, TensorMeta, flatten
from minicompiler.ir.symbolic import SymSize, size_code, symbol_of


@dataclass(frozen=True)
class Symbol:
    """A product of named runtime integers, e.g. `size1 * size2`. The names are kept sorted,
    so equal products compare equal (that is all `index_terms` asks of them)."""

    names: tuple[str, ...]

    def __mul__(self, other: Extent) -> Extent:
        if isinstance(other, Symbol):
            return Symbol(tuple(sorted(self.names + other.names)))
        if other in (0, 1):  # a broadcast stride, or the start of a product
            return 0 if other == 0 else self
        raise ValueError(f"{self} * {other}: a symbolic size only meets 0 and 1")

    __rmul__ = __mul__

    def __str__(self) -> str:
        text = " * ".join(self.names)
        return f"({text})" if len(self.names) > 1 else text


Extent = int | Symbol  # a size or stride: known now, or named in the generated code


def named(name: str) -> Symbol:
    return Symbol((name,))


# -- index arithmetic ---------------------------------------------------------------------
def index_terms(sizes: tuple[Extent, ...], strides: tuple[Extent, ...]) -> list[tuple[Extent, Extent | None, Extent]]:
    """Memory offset of element number v of a loop over `sizes`, for a tensor with `strides`,
    as terms (div, mod, stride) of `sum((v // div % mod) * stride)`.

    Dims of size 1 drop out, and neighbouring dims that are contiguous with each other merge,
    so a contiguous tensor is one term (1, None, 1): its offset is the loop index itself."""
    merged: list[tuple[Extent, Extent]] = []
    for size, stride in zip(sizes, strides, strict=True):
        if size == 1:
            continue
        if merged and merged[-1][1] == stride * size:
            merged[-1] = (merged[-1][0] * size, stride)
        else:
            merged.append((size, stride))
    total, terms, div = math.prod(sizes), [], 1
    for size, stride in reversed(merged):
        if stride != 0:  # a broadcast dim: every step along it reads the same element
            terms.append((div, None if div * size == total else size, stride))
        div *= size
    return terms[::-1]


def render_index(var: str, terms: list[tuple[Extent, Extent | None, Extent]], floordiv: str) -> str:
    parts = []
    for div, mod, stride in terms:
        text = var if div == 1 else f"{var} {floordiv} {div}"
        if mod is not None:
            text = f"{text} % {mod}"
        if stride != 1:
            text = f"({text}) * {stride}" if text != var else f"{stride} * {var}"
        parts.append(text)
    return " + ".join(parts) or "0"


def broadcast_strides(meta: TensorMeta, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of `meta`'s tensor broadcast to `shape` (0 along broadcast dims)."""
    pad = len(shape) - len(meta.shape)
    strides = meta.stride()
    return tuple(
        0 if d < pad or meta.shape[d - pad] == 1 else strides[d - pad] for d in range(len(shape))
    )


# -- a kernel's sizes ---------------------------------------------------------------------
class KernelSizes:
    """The sizes a kernel's text uses: its domain's (ints, or Symbols when dynamic), and the
    strides of each buffer it reads or writes, broadcast to the shape that reads it."""

    def __init__(self, kernel: Kernel, dynamic: bool) -> None:
        self.kernel, self.dynamic = kernel, dynamic
        self.domain: tuple[Extent, ...] = tuple(
            named(f"size{d}") if dynamic and size != 1 else size for d, size in enumerate(kernel.domain)
        )

    @property
    def reduced_shape(self) -> tuple[Extent, ...]:
        return tuple(self.domain[d] for d in self.kernel.kept_dims)

    @property
    def rows(self) -> Extent:
        return math.prod(self.reduced_shape)

    @property
    def row_length(self) -> Extent:
        """Elements per row: how far one sweep over the reduced dims goes."""
        return math.prod(self.domain[d] for d in self.kernel.reduction_dims)

    def of_shape(self, shape: tuple[int, ...]) -> tuple[Extent, ...]:
        """A shape the kernel iterates (its domain, keepdim or reduced shape), in Extents."""
        full = self.domain if len(shape) == len(self.kernel.domain) else self.reduced_shape
        static = self.kernel.domain if len(shape) == len(self.kernel.domain) else self.kernel.reduced_shape
        return tuple(e if s == k else s for e, s, k in zip(full, shape, static, strict=True))

    def _symbol_names(self) -> dict[str, str]:
        """Each symbol a size inside this kernel uses -> its name in the kernel: the size argument
        of a dim that is that symbol (`size1`), or an argument of its own (`sym_s0`)."""
        names = {}
        for symbol, dim_size in zip(self.domain, self.kernel.domain, strict=True):
            found = symbol_of(dim_size)
            if isinstance(symbol, Symbol) and found is not None and found[1] == 1:
                names.setdefault(found[0], str(symbol))
        for name in self._constant_symbols():
            names.setdefault(name, f"sym_{name}")
        return names

    def _constant_symbols(self) -> list[str]:
        """The symbols of sizes the kernel computes with as values (a mean's count)."""
        return sorted({name for node in self.kernel.nodes for arg in flatten((node.args, node.kwargs))
                       if isinstance(arg, SymSize) for name in arg.symbols()})

    def express(self, size: Any) -> str | None:
        """A symbolic size (a SymSize) in this kernel's size arguments (`size1 * sym_s0`);
        None when the kernel is not shape-generic."""
        if not self.dynamic or not isinstance(size, SymSize):
            return None
        return f"({size.code(self._symbol_names())})"

    def strides(self, meta: TensorMeta, shape: tuple[int, ...], param: str) -> tuple[Extent, ...]:
        """Strides of the buffer `param` (of `meta`) broadcast to `shape`: numbers when static;
        when dynamic, products of sizes (contiguous) or arguments `param_stride{d}` (strided)."""
        static = broadcast_strides(meta, shape)
        if not self.dynamic:
            return static
        if not meta.is_contiguous():
            pad = len(shape) - len(meta.shape)
            return tuple(0 if s == 0 else named(f"{param}_stride{d - pad}") for d, s in enumerate(static))
        strides: list[Extent] = []
        running: Extent = 1
        for size, stride in zip(reversed(self.of_shape(shape)), reversed(static), strict=True):
            strides.append(0 if stride == 0 else running)
            running = running if stride == 0 else running * size
        return tuple(reversed(strides))

    def gathered_strides(self, node: Node, param: str) -> tuple[Extent, ...]:
        """Strides of a buffer that load_at reads at computed offsets: its own (numbers when
        static; when dynamic, arguments `param_stride{d}`, as its sizes need not be the domain's)."""
        if not self.dynamic:
            return node.meta.stride()
        return tuple(0 if size == 1 or stride == 0 else named(f"{param}_stride{d}")
                     for d, (size, stride) in enumerate(zip(node.meta.shape, node.meta.stride(), strict=True)))

    def arguments(self, inputs: list[tuple[str, Node]], outputs: list[tuple[str, Node]]) -> list[SizeArgument]:
        """The runtime sizes and strides a dynamic kernel takes, in order (none when static).
        `inputs` and `outputs` are the kernel's buffers as (kernel parameter, node); sizes are
        read from inputs, strides from any buffer that is not contiguous (an output that is a view
        is allocated with its view's strides: see wrapper.py)."""
        if not self.dynamic:
            return []
        arguments = [self._size_argument(d, inputs) for d, size in enumerate(self.domain) if isinstance(size, Symbol)]
        gathered = {n.args[0] for n in self.kernel.nodes if n.op == "load_at"}
        for param, node in inputs + outputs:
            meta = node.meta
            if not meta.is_contiguous() or node in gathered:
                arguments += [SizeArgument(f"{param}_stride{d}", node, "stride", d, stride)
                              for d, (size, stride) in enumerate(zip(meta.shape, meta.stride(), strict=True))
                              if size != 1 and stride != 0]
        own = {name: param for name, param in self._symbol_names().items() if param.startswith("sym_")}
        return arguments + [SizeArgument(param, None, "shape", -1, SymSize({(name,): 1}, self._env()))
                            for name, param in own.items()]

    def _env(self) -> Any:
        return next(arg.env for node in self.kernel.nodes for arg in flatten((node.args, node.kwargs))
                    if isinstance(arg, SymSize))

    def _size_argument(self, dim: int, inputs: list[tuple[str, Node]]) -> SizeArgument:
        """Domain dim `dim`'s size, read from an input of the domain's rank that is not broadcast
        along it; with none (a kernel of constants), the number this graph has."""
        domain = self.kernel.domain
        for _, node in inputs:
            if len(node.meta.shape) == len(domain) and node.meta.shape[dim] == domain[dim]:
                return SizeArgument(f"size{dim}", node, "shape", dim, domain[dim])
        return SizeArgument(f"size{dim}", None, "shape", dim, domain[dim])


@dataclass(frozen=True)
class SizeArgument:
    """A size or stride a dynamic kernel takes at run time, and the tensor the wrapper reads it from."""

    param: str  # its name in the kernel: size0, in_x_stride1, ...
    buffer: Node | None  # None: no input has it; the wrapper passes `value`
    attribute: Literal["shape", "stride"]
    dim: int
    value: Any  # what it is in the graph the code was generated from (an int, or a SymSize)

    def source(self, variable: str | None) -> str:
        """The wrapper's Python expression for it, `variable` naming `buffer`."""
        if variable is None:
            return size_code(self.value)  # a number, or a symbolic size the wrapper has read
        return f"{variable}.shape[{self.dim}]" if self.attribute == "shape" else f"{variable}.stride({self.dim})"
