"""The one IR every stage reads and writes: a `Graph` of `Node`s.

A graph is a straight list of nodes in execution order (a topological order):
placeholders first, one `output` node last. Every other node applies one op from the
op table (`ir/ops.py`) to earlier nodes and Python constants, and produces exactly one
tensor, described by its `TensorMeta`. Ops that return several tensors in PyTorch
(`split`, `max(dim)`, ...) are captured as several nodes.

Graphs are built front to back with `Graph.call(...)`; passes build a *new* graph from
an old one (see `ir/transform.py`) rather than editing in place, so every stage's result
stays available for the report.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import keyword
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from minicompiler.ir.symbolic import size_code


@dataclass(frozen=True)
class SourceLoc:
    """Where in the user's Python a node came from (its provenance)."""

    filename: str
    lineno: int
    line: str = ""  # the source text of that line, stripped
    offset: int = -1  # bytecode offset of the instruction that made the node
    function: str = ""

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"


@dataclass(frozen=True)
class TensorMeta:
    """What a tensor looks like without its data: shape, dtype, device and strides."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device = torch.device("cpu")
    strides: tuple[int, ...] | None = None  # None: contiguous
    requires_grad: bool = False

    @staticmethod
    def of(t: torch.Tensor) -> TensorMeta:
        return TensorMeta(tuple(t.shape), t.dtype, t.device, tuple(t.stride()), t.requires_grad)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def stride(self) -> tuple[int, ...]:
        return self.strides if self.strides is not None else contiguous_strides(self.shape)

    def is_contiguous(self) -> bool:
        """Row-major without gaps (a dim of size 1 may have any stride: it is never stepped along)."""
        if self.strides is None:
            return True
        expected = contiguous_strides(self.shape)
        return all(n == 1 or s == e for n, s, e in zip(self.shape, self.strides, expected, strict=True))

    def fake(self) -> torch.Tensor:
        """A data-less tensor with this shape, dtype and strides (on the `meta` device)."""
        # int(): a symbolic size is specialized (guarded to stay this call's size), see symbolic.py
        shape, strides = tuple(map(int, self.shape)), tuple(map(int, self.stride()))
        return torch.empty_strided(shape, strides, dtype=self.dtype, device="meta")

    def __str__(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        return f"{dtype}[{', '.join(map(size_code, self.shape))}]"  # symbolic sizes as `s0`


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, running = [], 1
    for size in reversed(shape):
        strides.append(running)
        running *= max(size, 1)
    return tuple(reversed(strides))


@dataclass(eq=False)
class Node:
    """One operation. `args` hold earlier Nodes and Python constants (numbers, dtypes,
    tuples of ints, ...). A node is identified by object identity; `name` is for printing."""

    op: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    name: str
    meta: TensorMeta | None  # None only for the `output` node
    source: SourceLoc | None = None
    # Free-form facts a pass wants to leave on a node (e.g. "origin": the torch-level op
    # a primitive was decomposed from). Printed nowhere, read by the report.
    tags: dict[str, Any] = field(default_factory=dict)

    def inputs(self) -> list[Node]:
        """The nodes this node reads, in argument order (duplicates kept)."""
        # the passes ask this of every node again and again: no generators (flatten's) on this path
        found: list[Node] = []
        _collect_nodes(self.args, found)
        if self.kwargs:
            _collect_nodes(self.kwargs.values(), found)
        return found

    def __repr__(self) -> str:
        return f"%{self.name}"


def _collect_nodes(values: Any, found: list[Node]) -> None:
    """Append the Nodes among `values` (nested in tuples, lists and dicts) to `found`, in order."""
    for value in values:
        if isinstance(value, Node):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            _collect_nodes(value, found)
        elif isinstance(value, dict):
            _collect_nodes(value.values(), found)


def flatten(value: Any) -> Iterator[Any]:
    """Every leaf inside nested tuples, lists and dicts."""
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from flatten(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from flatten(v)
    else:
        yield value


CONTAINERS = (tuple, list, dict)


def map_structure(fn: Any, value: Any) -> Any:
    """Apply `fn` to every leaf of nested tuples/lists/dicts, keeping the structure."""
    kind = type(value)  # the plain containers first, without generators: every rewrite maps every node's args
    if kind is tuple:  # (a leaf is mapped here, not by a call of its own: most arguments are leaves)
        return tuple([map_structure(fn, v) if isinstance(v, CONTAINERS) else fn(v) for v in value])
    if kind is list:
        return [map_structure(fn, v) if isinstance(v, CONTAINERS) else fn(v) for v in value]
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
        return type(value)(*(map_structure(fn, v) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(map_structure(fn, v) for v in value)
    if isinstance(value, dict):
        return {k: map_structure(fn, v) for k, v in value.items()}
    return fn(value)


# Names a node must not take: it becomes a variable in generated Python (wrapper, printed graph)
# and part of names in generated C++, so keywords of either language would not compile, and
# names the generated code itself refers to (modules, float('inf')) would be shadowed.
CPP_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t
    class compl concept const consteval constexpr constinit const_cast continue co_await co_return
    co_yield decltype default delete do double dynamic_cast else enum explicit export extern false
    float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr operator
    or or_eq private protected public register reinterpret_cast requires return short signed sizeof
    static static_assert static_cast struct switch template this thread_local throw true try typedef
    typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
    """.split())
NAMES_GENERATED_CODE_USES = frozenset({"torch", "ops", "tl", "triton", "float", "int", "inputs", "call"})
RESERVED_NAMES = frozenset(keyword.kwlist) | CPP_KEYWORDS | NAMES_GENERATED_CODE_USES


@functools.lru_cache(maxsize=4096)  # asked for every node made (most names are op names, over and over)
def identifier(text: str) -> str:
    """A name safe in generated Python and C++: ASCII letters, digits and `_` only (`é` -> `e`,
    a quote or newline -> `_`), not starting with a digit, and a keyword gets a `_` (`class_`)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in ascii_text)
    if not name.strip("_"):  # nothing readable left (`变量`): a plain name
        name = "v"
    if name[0].isdigit():
        name = "v" + name
    return name + "_" if name in RESERVED_NAMES else name


class Graph:
    """A list of nodes in execution order, ending with one `output` node."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self._names = itertools.count()
        self._used_names: set[str] = set()
        self._source: SourceLoc | None = None  # default provenance for new nodes

    # -- building ---------------------------------------------------------------------
    def placeholder(self, name: str, meta: TensorMeta, source: SourceLoc | None = None) -> Node:
        node = Node("placeholder", (), {}, self._fresh_name(name), meta, source or self._source)
        self._insert_placeholder(node)
        return node

    def call(self, op: str, *args: Any, source: SourceLoc | None = None, **kwargs: Any) -> Node:
        """Append `op(*args, **kwargs)`; its TensorMeta is inferred from the op table."""
        from minicompiler.ir.ops import infer_meta  # ops imports graph: import here

        return self.append(op, args, kwargs, infer_meta(op, args, kwargs), source)

    def copy_of(self, node: Node, args: tuple[Any, ...], kwargs: dict[str, Any],
                source: SourceLoc | None = None) -> Node:
        """Append `node` (of another graph) with its arguments mapped to `args` and `kwargs`. Where
        every input it reads looks as its did (the same TensorMeta), so does the copy: its meta is
        kept, not inferred again (inferring runs the op on stand-in tensors, and a pass copies most
        nodes unchanged)."""
        found: list[Node] = []
        _collect_nodes(args, found)
        _collect_nodes(kwargs.values(), found)
        original = node.inputs()
        if len(found) == len(original) and all(a.meta == b.meta for a, b in zip(found, original, strict=True)):
            return self.append(node.op, args, kwargs, node.meta, source)
        return self.call(node.op, *args, source=source, **kwargs)

    def append(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any], meta: TensorMeta | None,
               source: SourceLoc | None = None) -> Node:
        """`call` with the TensorMeta already known."""
        if self.nodes and self.nodes[-1].op == "output":
            raise ValueError("cannot add nodes after the output node")
        node = Node(op, tuple(args), dict(kwargs), self._fresh_name(op), meta, source or self._source)
        self.nodes.append(node)
        return node

    def call_before(self, anchor: Node, op: str, *args: Any, **kwargs: Any) -> Node:
        """`call`, with the new node placed just before `anchor` (which may then read it): a pass
        that changes a finished graph in place."""
        from minicompiler.ir.ops import infer_meta

        meta = infer_meta(op, args, kwargs)
        node = Node(op, tuple(args), dict(kwargs), self._fresh_name(op), meta, anchor.source)
        self.nodes.insert(self.nodes.index(anchor), node)
        return node

    def output(self, value: Any) -> Node:
        """Finish the graph. `value` is any nesting of tuples/lists/dicts of Nodes and constants."""
        node = Node("output", (value,), {}, "output", None)
        self.nodes.append(node)
        return node

    @contextlib.contextmanager
    def provenance(self, source: SourceLoc | None) -> Iterator[None]:
        """Nodes created inside this block get `source` unless given one explicitly."""
        saved, self._source = self._source, source
        try:
            yield
        finally:
            self._source = saved

    def _insert_placeholder(self, node: Node) -> None:
        index = 0
        while index < len(self.nodes) and self.nodes[index].op == "placeholder":
            index += 1
        self.nodes.insert(index, node)

    def _fresh_name(self, base: str) -> str:
        base = identifier(base)
        name = base
        while name in self._used_names:
            name = f"{base}_{next(self._names)}"
        self._used_names.add(name)
        return name

    # -- reading ----------------------------------------------------------------------
    @property
    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "placeholder"]

    @property
    def output_node(self) -> Node:
        assert self.nodes and self.nodes[-1].op == "output", "graph has no output node"
        return self.nodes[-1]

    @property
    def outputs(self) -> Any:
        """The output structure (nested tuples/lists/dicts of Nodes and constants)."""
        return self.output_node.args[0]

    def output_nodes(self) -> list[Node]:
        return [v for v in flatten(self.outputs) if isinstance(v, Node)]

    def users(self) -> dict[Node, list[Node]]:
        """For each node, the nodes (including `output`) that read it."""
        users: dict[Node, list[Node]] = {n: [] for n in self.nodes}
        for node in self.nodes:
            for inp in node.inputs():
                if node not in users[inp]:
                    users[inp].append(node)
        return users

    def compute_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.op not in ("placeholder", "output")]

    def __len__(self) -> int:
        return len(self.nodes)

    def __str__(self) -> str:
        from minicompiler.ir.printer import graph_to_python

        return graph_to_python(self)

    __repr__ = __str__
