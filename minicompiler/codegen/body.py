"""A kernel's body, written once against an `ops` handler (see `common.py`).

Pointwise kernel: for each element, compute every node and store the ones that are buffers.
A scatter (store_at) ends a pointwise kernel over its values: each element is combined into the
output at the position computed for it, rather than stored at its own.

Reduction kernel, for each row:
    stage 0: row values that need no reduction
    sweep 0: loop over the reduced dims: the reductions that need no other reduction
    stage 1: their results, and the row values that need them
    sweep 1: the reductions that need stage 1 (softmax: amax in sweep 0, sum in sweep 1)
    ...
    last sweep: element values stored to memory (softmax's output needs both reductions)
Each sweep recomputes the element values it needs from the inputs: cheap arithmetic
instead of an intermediate buffer. A backend that can keep a row in a per-thread array
(C++, rows of known length: `ops.row_cache_limit`) instead saves the element values a later
sweep needs as the first sweep computes them, and later sweeps read them back: LayerNorm
after GELU then computes erf once per element, not once per sweep, BatchNorm's backward
reads its row from cache rather than memory, and every sweep sees the very same bits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from minicompiler.codegen.common import (
    LOGICAL,
    LOW_PRECISION,
    KernelOps,
    Level,
    Value,
    compute_dtype,
    python_value,
)
from minicompiler.fuse.schedule import Kernel, writes_into
from minicompiler.ir.graph import Node, TensorMeta
from minicompiler.ir.ops import COMPARISONS, OPS
from minicompiler.ir.reductions import INDEX_REDUCTIONS
from minicompiler.ir.scans import INDEX_SCANS
from minicompiler.ir.symbolic import SymSize, size_hint

# pow(x, c) for the exponents torch itself special-cases: same results, and no pow call.
POW_BY_EXPONENT = {
    2: lambda ops, x: ops.mul(x, x),  # x**2 -> x*x
    3: lambda ops, x: ops.mul(ops.mul(x, x), x),  # x**3 -> x*x*x
    0.5: lambda ops, x: ops.sqrt(x),  # x**0.5 -> sqrt(x)
    -0.5: lambda ops, x: ops.rsqrt(x),  # x**-0.5 -> rsqrt(x)
    -1: lambda ops, x: ops.reciprocal(x),  # x**-1 -> 1/x
    -2: lambda ops, x: ops.reciprocal(ops.mul(x, x)),  # x**-2 -> 1/(x*x)
}


def param_name(node: Node, stored: bool) -> str:
    """The kernel parameter that points at `node`'s buffer."""
    return f"{'out' if stored else 'in'}_{node.name}"


def input_params(kernel: Kernel) -> list[tuple[str, Node]]:
    """(parameter, node) of each buffer the kernel reads."""
    return [(param_name(b.node, False), b.node) for b in kernel.inputs]


def output_params(kernel: Kernel) -> list[tuple[str, Node]]:
    """(parameter, node) of each buffer the kernel writes."""
    return [(param_name(b.node, True), b.node) for b in kernel.outputs]


def in_place_params(kernel: Kernel) -> list[tuple[str, str, Node]]:
    """(input parameter, output parameter, input) for each input the kernel reads and also
    overwrites with its new value (fuse/in_place.py): the input is not passed on its own, its
    parameter is declared in the kernel as the output's pointer."""
    reads = {i for node in kernel.nodes for i in node.inputs() if not writes_into(node, i)}
    return [(param_name(b.into, False), param_name(b.node, True), b.into)
            for b in kernel.outputs if b.into is not None and b.into in reads]


def _full_value(node: Node) -> bool | int | float:
    value = node.args[1] if len(node.args) > 1 else node.kwargs["value"]
    return python_value(value, node.meta.dtype)


def _operand_dtypes(node: Node, operands: list[Any]) -> list[torch.dtype]:
    """The compute dtype each operand is converted to before the op (torch's type promotion)."""
    out = compute_dtype(node.meta.dtype)
    if node.op in COMPARISONS:  # compare in the promoted type of the operands
        # promotion reads dtypes and which operands are 0-d, not sizes (which may be symbols)
        fakes = [torch.empty((1,) * a.meta.ndim, dtype=a.meta.dtype, device="meta") if isinstance(a, Node)
                 else size_hint(a) for a in operands]
        return [compute_dtype(torch.result_type(*fakes))] * 2
    if node.op in LOGICAL:
        return [torch.bool] * len(operands)
    if node.op == "where":
        return [torch.bool, out, out]
    if node.op in ("convert", "signbit"):  # the operand as it is: a cast, a test of its sign
        return [compute_dtype(operands[0].meta.dtype)]
    return [out] * len(operands)


def accumulator_dtype(reduction: Node, wide_sums: bool = False) -> torch.dtype:
    """What a reduction's (or scan's) accumulator holds: its result, in compute dtype; for argmax,
    argmin and the index scans, the best value so far, in its input's compute dtype (the position
    is kept beside it, in int64). `wide_sums`: a float32 sum adds up in float64 (see KernelOps)."""
    positions = reduction.op in INDEX_REDUCTIONS or reduction.op in INDEX_SCANS
    dtype = compute_dtype((reduction.args[0] if positions else reduction).meta.dtype)
    return torch.float64 if wide_sums and reduction.op == "sum" and dtype == torch.float32 else dtype


BOOL_ARITHMETIC = {"add": "logical_or", "mul": "logical_and", "maximum": "logical_or", "minimum": "logical_and"}


@dataclass
class Sweep:
    """One loop over the reduced dims of a row."""

    reductions: list[Node] = field(default_factory=list)
    stores: list[Node] = field(default_factory=list)  # element values stored in this sweep
    nodes: list[Node] = field(default_factory=list)  # element values it computes
    cache_writes: list[Node] = field(default_factory=list)  # of `nodes`, kept for later sweeps
    cache_reads: list[Node] = field(default_factory=list)  # element values an earlier sweep kept


def plan_sweeps(kernel: Kernel, stored: set[Node], cache_rows: bool = False) -> tuple[list[list[Node]], list[Sweep]]:
    """(row values per stage, sweeps) of a reduction kernel; see the module docstring.
    `cache_rows`: a later sweep reads the element values an earlier one computed from the row
    cache, rather than computing them again."""
    ready: dict[Node, int] = {}  # how many sweeps must finish before a node can be computed
    for node in kernel.nodes:
        before = max((ready[i] for i in node.inputs() if i in ready), default=0)
        ready[node] = before + 1 if OPS[node.op].kind == "reduction" else before
    reductions = [n for n in kernel.nodes if OPS[n.op].kind == "reduction"]
    element_stores = [n for n in kernel.nodes if n in stored and not kernel.is_row_value(n)]
    count = max([ready[r] for r in reductions] + [ready[e] + 1 for e in element_stores])
    sweeps = [Sweep() for _ in range(count)]
    for r in reductions:
        sweeps[ready[r] - 1].reductions.append(r)
    for e in element_stores:
        sweeps[ready[e]].stores.append(e)
    members = set(kernel.nodes)
    computed_in: dict[Node, Sweep] = {}  # element value -> the first sweep that computes it
    for sweep in sweeps:
        needed: set[Node] = set()
        pending = [i for r in sweep.reductions for i in r.inputs()] + sweep.stores
        while pending:
            node = pending.pop()
            if node not in members or kernel.is_row_value(node) or node in needed:
                continue
            if cache_rows and node in computed_in:
                sweep.cache_reads.append(node)
                computed_in[node].cache_writes.append(node)
                continue
            needed.add(node)
            pending += node.inputs()
        sweep.nodes = [n for n in kernel.nodes if n in needed]
        computed_in.update((n, sweep) for n in sweep.nodes)
    for sweep in sweeps:
        sweep.cache_reads = [n for n in kernel.nodes if n in set(sweep.cache_reads)]
        sweep.cache_writes = [n for n in kernel.nodes if n in set(sweep.cache_writes)]
    row_values = [n for n in kernel.nodes if OPS[n.op].kind != "reduction" and kernel.is_row_value(n)]
    stages = [[n for n in row_values if ready[n] == k] for k in range(count + 1)]
    return stages, sweeps


class BodyWriter:
    """Walks a kernel's nodes and writes its body through `ops`.

    A scope maps each node computed so far to its Value, and (node, level) to a loaded buffer:
    the same buffer read per row and per element is two different loads."""

    def __init__(self, kernel: Kernel, ops: KernelOps) -> None:
        self.kernel, self.ops = kernel, ops
        self.stored = {b.node for b in kernel.outputs}
        self.carries: dict[Node, str] = {}  # scan -> its accumulator in the sweep being written

    def write(self) -> None:
        if self.kernel.kind == "pointwise":
            scope: dict[Any, Value] = {}
            for node in self.kernel.nodes:
                self.compute(node, "element", scope)
            return
        stages, sweeps = self._plan()
        for node in (n for sweep in sweeps for n in sweep.cache_writes):
            self.ops.declare_row_cache(node)
        row_scope: dict[Any, Value] = {}
        for k, stage in enumerate(stages):
            for node in stage:
                self.compute(node, "row", row_scope)
            if k < len(sweeps):
                self.write_sweep(sweeps[k], row_scope)

    def write_sweep(self, sweep: Sweep, row_scope: dict[Any, Value]) -> None:
        ops, accumulators = self.ops, []
        wide = ops.sums_in_float64
        for r in sweep.reductions:
            with ops.writer.origin(r):
                accumulators.append((ops.reduction_init(r.op, accumulator_dtype(r, wide)), r.op))
        # a scan's accumulator runs along the row as a reduction's does; each sweep that computes
        # the scan starts its own
        for node in (n for n in sweep.nodes if OPS[n.op].kind == "scan"):
            with ops.writer.origin(node):
                self.carries[node] = ops.scan_init(node.op, accumulator_dtype(node))
        with ops.sweep(accumulators + [(self.carries[n], n.op) for n in sweep.nodes if n in self.carries]):
            scope = dict(row_scope)  # element values live in the loop: they do not leak out
            for node in sweep.cache_reads:
                with ops.writer.origin(node):
                    scope[node] = ops.read_row_cache(node)
            for node in sweep.nodes:
                self.compute(node, "element", scope, store=node in sweep.stores)
                if node in sweep.cache_writes:
                    with ops.writer.origin(node):
                        ops.write_row_cache(node, scope[node])
            for r, (acc, op) in zip(sweep.reductions, accumulators, strict=True):
                with ops.writer.origin(r):
                    value = self.operand(r.args[0], accumulator_dtype(r, wide), scope, "element")
                    ops.reduction_update(acc, op, value)
        for r, (acc, op) in zip(sweep.reductions, accumulators, strict=True):
            with ops.writer.origin(r):
                result = ops.reduction_result(acc, op, accumulator_dtype(r, wide))
                row_scope[r] = self.rounded(r, ops.to_dtype(result, compute_dtype(r.meta.dtype)))
                self.store_if_needed(r, row_scope[r], "row")

    def _plan(self) -> tuple[list[list[Node]], list[Sweep]]:
        """The sweeps, with a row cache where the backend keeps one and the row's cached values
        fit it (rows of a size known only at run time never do)."""
        length, limit = self.ops.sizes.row_length, self.ops.row_cache_limit
        if limit and isinstance(length, int):
            stages, sweeps = plan_sweeps(self.kernel, self.stored, cache_rows=True)
            cached = [n for sweep in sweeps for n in sweep.cache_writes]
            if length * sum(compute_dtype(n.meta.dtype).itemsize for n in cached) <= limit:
                return stages, sweeps
        return plan_sweeps(self.kernel, self.stored)

    def compute(self, node: Node, level: Level, scope: dict[Any, Value], store: bool = True) -> None:
        with self.ops.writer.origin(node):
            if OPS[node.op].kind == "scatter":  # stored at its positions, not at the loop's element
                self.store_at(node, level, scope)
                return
            if OPS[node.op].kind == "view":  # a view in a kernel renames a value (fuse/rules.py)
                scope[node] = self.operand(node.args[0], compute_dtype(node.meta.dtype), scope, level)
            elif OPS[node.op].kind == "scan":  # the element folded into the row's running value
                value = self.operand(node.args[0], accumulator_dtype(node), scope, level)
                result = self.ops.scan_update(self.carries[node], node.op, value, compute_dtype(node.meta.dtype))
                scope[node] = self.rounded(node, result)
            else:
                scope[node] = self.rounded(node, self.pointwise(node, level, scope))
            if store:
                self.store_if_needed(node, scope[node], level)

    def rounded(self, node: Node, value: Value) -> Value:
        """float16/bfloat16 values are computed in float32 and rounded after each op, as in eager."""
        return self.ops.round_to(value, node.meta.dtype) if node.meta.dtype in LOW_PRECISION else value

    def store_if_needed(self, node: Node, value: Value, level: Level) -> None:
        if node in self.stored:
            meta = node.meta
            param = param_name(node, True)
            self.ops.store(param, meta.dtype, self.ops.index(param, meta, level, meta.shape), value, level)

    def operand(self, arg: Any, dtype: torch.dtype, scope: dict[Any, Value], level: Level,
                shape: tuple[int, ...] | None = None) -> Value:
        """`arg` (a node or a Python number) as a value of compute dtype `dtype`, read by a
        consumer of shape `shape` (the domain, for element values)."""
        ops = self.ops
        if isinstance(arg, SymSize):  # a size (a mean's count): from the kernel's size arguments
            text = ops.sizes.express(arg)
            return ops.size_value(text, dtype) if text else ops.constant(python_value(int(arg), dtype), dtype)
        if not isinstance(arg, Node):
            return ops.constant(python_value(arg, dtype), dtype)
        if arg in scope:
            return ops.to_dtype(scope[arg], dtype)
        if arg.op == "full" and arg not in self.kernel.nodes:  # constants are written inline
            return ops.constant(python_value(_full_value(arg), dtype), dtype)
        if arg.op == "iota" and arg not in self.kernel.nodes:  # and so are indices
            return ops.to_dtype(self.coordinate(arg, level, shape or self.kernel.domain), dtype)
        if (arg, level) not in scope:  # a buffer: load it once per loop
            param = param_name(arg, False)
            index = ops.index(param, arg.meta, level, shape or self.kernel.domain)
            scope[arg, level] = ops.load(param, arg.meta.dtype, index, level)
        return ops.to_dtype(scope[arg, level], dtype)

    def pointwise(self, node: Node, level: Level, scope: dict[Any, Value]) -> Value:
        ops = self.ops
        out = compute_dtype(node.meta.dtype)
        if node.op == "full":
            return ops.constant(_full_value(node), out)
        if node.op == "iota":
            return self.coordinate(node, level, node.meta.shape)
        if node.op == "load_at":
            return self.load_at(node, level, scope)
        operands = [a for a in node.args if isinstance(a, Node | bool | int | float | SymSize)]
        dtypes = _operand_dtypes(node, operands)
        shape = node.meta.shape
        values = [self.operand(a, t, scope, level, shape) for a, t in zip(operands, dtypes, strict=True)]
        if node.op == "convert":
            return ops.to_dtype(values[0], out)
        if node.op in ("floor", "ceil", "trunc", "round") and not out.is_floating_point:
            return values[0]  # integers are already whole
        if node.op == "pow":
            return self.power(operands[1], values, out)
        if out == torch.bool and node.op in BOOL_ARITHMETIC:
            # torch's True + True is True: on bools, + and * are `or` and `and` (C++ and Triton
            # would compute 2 and store it into a bool)
            return getattr(ops, BOOL_ARITHMETIC[node.op])(*values)
        return getattr(ops, node.op)(*values)

    def coordinate(self, node: Node, level: Level, shape: tuple[Any, ...]) -> Value:
        """An iota's value: the loop's position along its dim, found as the offset of the element
        of a contiguous buffer of its one-hot shape (stride 1 along the dim, broadcast elsewhere)."""
        meta = TensorMeta(node.meta.shape, node.meta.dtype, node.meta.device)  # contiguous strides
        index = self.ops.index(param_name(node, False), meta, level, shape)
        return self.ops.index_value(index, compute_dtype(node.meta.dtype))

    def load_at(self, node: Node, level: Level, scope: dict[Any, Value]) -> Value:
        """x[i0, i1, ...]: the offset sum(i_d * stride_d) computed from the index values, then a
        load there (the indices are in range: the decompositions make sure of it)."""
        source, indices = node.args
        param = param_name(source, False)
        terms = []
        for size, stride, index in zip(source.meta.shape, self.ops.sizes.gathered_strides(source, param),
                                       indices, strict=True):
            if size == 1 or stride == 0:  # one element along this dim: its index is 0
                continue
            value = self.operand(index, torch.int64, scope, level, node.meta.shape)
            terms.append(value.text if stride == 1 else f"({value}) * {stride}")
        moving = any(isinstance(i, Node) for i in indices)
        return self.ops.load(param, source.meta.dtype, " + ".join(terms) or "0", level, gathered=moving)

    def store_at(self, node: Node, level: Level, scope: dict[Any, Value]) -> None:
        """out.flat[position] = combine(out.flat[position], value) for the loop's element of the
        values: the output is the base's memory or its copy (fuse/buffers.py), laid out row-major,
        so a flat position is an offset; it is in range (the decompositions check it)."""
        _, position, values, combine = node.args
        offset = self.operand(position, torch.int64, scope, level)
        value = self.operand(values, compute_dtype(node.meta.dtype), scope, level)
        self.ops.store_at(param_name(node, True), node.meta.dtype, offset, value, combine)

    def power(self, exponent: Any, values: list[Value], out: torch.dtype) -> Value:
        ops = self.ops
        if not isinstance(exponent, Node) and exponent in POW_BY_EXPONENT:
            if out.is_floating_point or exponent in (2, 3):
                return POW_BY_EXPONENT[exponent](ops, values[0])
        if out.is_floating_point:
            return ops.pow(*values)
        # integer powers: computed in float64 and rounded to the nearest integer (exact below
        # 2**53), then narrowed through int64 so that they wrap around as torch's do
        wide = ops.pow(*[ops.to_dtype(v, torch.float64) for v in values])
        whole = ops.to_dtype(ops.floor(ops.add(wide, ops.constant(0.5, torch.float64))), torch.int64)
        return ops.to_dtype(whole, out)
