"""Outer reductions on the CPU, many rows at once.

A reduction whose rows lie side by side in memory (`Kernel.outer_reduction`: the column means
of a row-major matrix, `X.mean(axis=0)`) would walk each row with a large stride, one row after
another: every element on a cache line of its own, each line fetched again for the next row.
Tiled, a thread takes LANES neighbouring rows and sweeps them together. Each step of a sweep
reads LANES neighbouring elements (whole cache lines, in one SIMD loop), and each row value
(an accumulator, a mean) becomes an array with an entry per lane:

    for (int64_t xb = 0; xb < 640; xb += 32) {
        const int64_t lanes = std::min<int64_t>(32, 640 - xb);
        double acc0[32];
        for (int64_t l = 0; l < lanes; ++l) {   // row values: a loop over the lanes
            const int64_t x = xb + l;
            acc0[l] = 0.0;
        }
        for (int64_t r = 0; r < 1024; ++r) {    // a sweep: the lanes innermost
            #pragma omp simd
            for (int64_t l = 0; l < lanes; ++l) {
                const int64_t x = xb + l;
                double tmp1 = in_X[x + 640 * r];
                acc0[l] = acc0[l] + tmp1;
            }
        }
        ...

Each lane adds its elements in order, as one thread of eager's column sum does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch

from minicompiler.codegen.common import CodeWriter, KernelOps, Value, reduction_identity
from minicompiler.fuse.schedule import Kernel
from minicompiler.ir.ops import OPS

LANES = 32  # rows swept together: 256 bytes of float64 per input and step, 4 cache lines
LANE_REDUCTIONS = {"sum", "prod", "amax", "amin"}  # argmax and scans keep a position: not per lane


def tiles_rows(kernel: Kernel) -> bool:
    """Whether the kernel is an outer reduction that the lanes can sweep: plain reductions and
    pointwise values, nothing gathered or scattered."""
    if kernel.kind != "reduction" or not kernel.outer_reduction:
        return False
    kinds = {OPS[n.op].kind for n in kernel.nodes}
    reductions = {n.op for n in kernel.nodes if OPS[n.op].kind == "reduction"}
    return not kinds & {"scan", "scatter"} and reductions <= LANE_REDUCTIONS and not any(
        n.op == "load_at" for n in kernel.nodes)


class LaneWriter(CodeWriter):
    """The lines of a tiled kernel's body. A row-level line runs once per lane: written outside
    a sweep, it opens a loop over the lanes if none is open."""

    def __init__(self) -> None:
        super().__init__()
        self.in_sweep = False
        self.lanes_open = False

    def line(self, text: str) -> None:
        if not self.in_sweep and not self.lanes_open:
            self.lanes_open = True
            self.open_lanes()
        super().line(text)

    def open_lanes(self) -> None:
        super().line("for (int64_t l = 0; l < lanes; ++l) {")
        self._indent += 1
        super().line("const int64_t x = xb + l;")

    def close_lanes(self) -> None:
        self._indent -= 1
        super().line("}")

    def end_row_code(self) -> None:
        if self.lanes_open:
            self.lanes_open = False
            self.close_lanes()


class LaneOps(KernelOps):
    """Put ahead of the C++ ops handler (`class TiledCppOps(LaneOps, CppOps)`): row values are
    arrays over the lanes, their declarations gathered in `declarations` (written before the
    body), and sweeps loop over the lanes innermost."""

    row_cache_limit = 0  # a cached row per lane would take LANES times the memory
    writer: LaneWriter
    reduced_loops: Callable[[], contextlib.AbstractContextManager[None]]  # the handler's own loops

    def __init__(self, kernel: Kernel, dynamic: bool = False) -> None:
        super().__init__(kernel, dynamic)
        self.writer = LaneWriter()
        self.declarations = CodeWriter()

    def assign(self, expr: str, dtype: torch.dtype) -> Value:
        if self.writer.in_sweep:
            return super().assign(expr, dtype)
        name = self.fresh("tmp")
        self.declarations.line(f"{self.type_name(dtype)} {name}[{LANES}];")
        self.writer.line(f"{name}[l] = {expr};")
        return Value(f"{name}[l]", dtype)

    def reduction_init(self, op: str, dtype: torch.dtype) -> str:
        acc = self.fresh("acc")
        self.declarations.line(f"{self.type_name(dtype)} {acc}[{LANES}];")
        self.writer.line(f"{acc}[l] = {self.constant(reduction_identity(op, dtype), dtype)};")
        return f"{acc}[l]"

    @contextlib.contextmanager
    def sweep(self, accumulators: list[tuple[str, str]]) -> Iterator[None]:
        # no `omp simd reduction`: each lane has an accumulator of its own, and the SIMD loop
        # runs across the lanes
        self.writer.end_row_code()
        self.writer.in_sweep = True
        with self.reduced_loops():
            self.writer.line("#pragma omp simd")
            self.writer.open_lanes()
            yield
            self.writer.close_lanes()
        self.writer.in_sweep = False


def write_tiled_rows(writer: CodeWriter, ops: LaneOps, parallel: str | None) -> None:
    """The loop over blocks of LANES rows around the body `ops` has written."""
    ops.writer.end_row_code()
    rows = ops.sizes.rows
    if parallel is not None:
        writer.line(f"#pragma omp parallel for{parallel}")
    writer.line(f"for (int64_t xb = 0; xb < {rows}; xb += {LANES}) {{")
    with writer.indent():
        writer.line(f"const int64_t lanes = std::min<int64_t>({LANES}, {rows} - xb);")
        writer.extend(ops.declarations)
        writer.extend(ops.writer)
    writer.line("}")
