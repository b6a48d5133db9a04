"""The C++ backend: the `ops` calls of a kernel body spelled as C++ (OpenMP loops, one
`extern "C"` function per kernel), compiled with g++ and called through ctypes.

    extern "C" void kernel_exp_exp(const float* __restrict__ in_x, float* __restrict__ out_exp_1) {
        #pragma omp parallel for simd
        for (int64_t x = 0; x < 4194304; ++x) {
            float tmp0 = in_x[x];
            float tmp1 = std::exp(tmp0);
            ...

GCC vectorizes std::exp, std::cos, ... into calls of glibc's vector math (libmvec). float32 sin
and cos get more: inline polynomials (cpp_prelude's fast_sin/fast_cos), a little faster than libmvec's
alone, and, unlike libmvec's, still vectorized when one loop needs both sin(x) and cos(x) (GCC
would merge those into one scalar sincosf call). They are exact only for |x| <= 125, so such a
loop runs in blocks that check their arguments, and a block with one out of range runs again
with std::sin/std::cos (`_blocked_loop`).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
from collections.abc import Callable, Iterator

import torch

from minicompiler.codegen import cpp_bessel, cpp_prelude, cpp_special, orthogonal_polynomials
from minicompiler.codegen.body import (
    BOOL_ARITHMETIC,
    BodyWriter,
    in_place_params,
    input_params,
    output_params,
    param_name,
)
from minicompiler.codegen.common import (
    CodegenError,
    CodeWriter,
    KernelOps,
    Level,
    Value,
    compute_dtype,
    helpers_used,
    provenance_comment,
    reduction_identity,
)
from minicompiler.codegen.cpp_tiled import LaneOps, tiles_rows, write_tiled_rows
from minicompiler.codegen.scatter_blocks import independent_blocks
from minicompiler.codegen.sizes import Extent, KernelSizes, index_terms, render_index
from minicompiler.fuse.schedule import Kernel
from minicompiler.ir.graph import Node
from minicompiler.ir.ops import OPS
from minicompiler.ir.reductions import INDEX_REDUCTIONS
from minicompiler.ir.scans import INDEX_SCANS, SCAN_REDUCTION
from minicompiler.ir.scatter import ATOMIC_DTYPES
from minicompiler.runtime import loader

PARALLEL_THRESHOLD = 32768  # fewer elements than this: one thread beats waking OpenMP's team
FAST_TRIG = {"sin": "fast_sin", "cos": "fast_cos"}  # float32 only; see cpp_prelude.py
UNIT_TRIG = {"sin": "sin_of_unit", "cos": "cos_of_unit"}  # ... of arguments in [-1, 1]
FAST_TRIG_BLOCK = 4096  # elements checked together: a block with a large argument is redone exactly

COMPUTE_TYPES = {
    torch.float32: "float", torch.float64: "double", torch.int64: "int64_t", torch.int32: "int32_t",
    torch.int16: "int16_t", torch.int8: "int8_t", torch.uint8: "uint8_t", torch.bool: "bool",
}
STORAGE_TYPES = {**COMPUTE_TYPES, torch.float16: "_Float16", torch.bfloat16: "uint16_t"}

TEMPLATES = {
    "clone": "{0}", "neg": "negate({0})", "abs": "std::abs({0})", "exp": "std::exp({0})", "log": "std::log({0})",
    "sqrt": "std::sqrt({0})", "rsqrt": "1 / std::sqrt({0})", "sin": "std::sin({0})", "cos": "std::cos({0})",
    "tan": "std::tan({0})", "tanh": "std::tanh({0})", "erf": "std::erf({0})", "log1p": "std::log1p({0})",
    "expm1": "std::expm1({0})", "reciprocal": "1 / {0}", "floor": "std::floor({0})", "ceil": "std::ceil({0})",
    "trunc": "std::trunc({0})", "sign": "sign({0})", "logical_not": "!{0}",
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}",
    "pow": "std::pow({0}, {1})",
    "maximum": "max_propagate_nan({0}, {1})", "minimum": "min_propagate_nan({0}, {1})",
    "eq": "{0} == {1}", "ne": "{0} != {1}", "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}",
    "ge": "{0} >= {1}", "logical_and": "{0} && {1}", "logical_or": "{0} || {1}",
    "remainder": "python_remainder({0}, {1})", "where": "{0} ? {1} : {2}",
    "asin": "std::asin({0})", "acos": "std::acos({0})", "atan": "std::atan({0})", "asinh": "std::asinh({0})",
    "acosh": "std::acosh({0})", "atanh": "std::atanh({0})", "erfc": "std::erfc({0})",
    "round": "std::nearbyint({0})",  # the default rounding mode: to nearest, halves to even
    "sigmoid": "1 / (1 + std::exp(-{0}))",
    "signbit": "sign_bit({0})", "atan2": "std::atan2({0}, {1})", "fmod": "c_fmod({0}, {1})",
    **cpp_special.TEMPLATES,  # lgamma, digamma, zeta, erfinv, erfcx, ndtri, Bessel I0/I1, ...
    **cpp_bessel.TEMPLATES,  # Bessel J, Y, K, Airy Ai
    **orthogonal_polynomials.CPP_TEMPLATES,  # Chebyshev, Hermite, Laguerre, Legendre
}
REDUCE = {"sum": "{acc} + {value}", "prod": "{acc} * {value}", "amax": "max_propagate_nan({acc}, {value})",
          "amin": "min_propagate_nan({acc}, {value})",
          # argmax/argmin keep the best value in `acc` and its position in the row in `acc_index`
          "argmax": "argmax_step({acc}, {acc}_index, {value}, {position})",
          "argmin": "argmin_step({acc}, {acc}_index, {value}, {position})"}
# store_at's combines as the pointwise op that merges two values (adds of ATOMIC_DTYPES: `omp atomic`)
SCATTER_COMBINE = {"add": "add", "amax": "maximum", "amin": "minimum"}
OMP_REDUCTION = {"sum": "+", "prod": "*", "amax": "max_propagate_nan", "amin": "min_propagate_nan"}
# a scan's step; cumsum, cumprod, cummax and cummin step as their reduction does (SCAN_REDUCTION)
SCAN_STEP = {"logcumsumexp": "{acc} = log_add_exp({acc}, {value})",
             "cummax_index": "cummax_step({acc}, {acc}_index, {value}, {position})",
             "cummin_index": "cummin_step({acc}, {acc}_index, {value}, {position})"}


class CppOps(KernelOps):
    row_cache_limit = 4 << 20  # bytes of a row's cached element values, per thread
    sums_in_float64 = True  # as eager's CPU kernels (KernelOps says why)
    templates, floordiv, xvar, rvar = TEMPLATES, "/", "x", "r"

    def __init__(self, kernel: Kernel, dynamic: bool = False, fast_trig: bool = False) -> None:
        super().__init__(kernel, dynamic)
        self.fast_trig = fast_trig
        self.atomic_adds = True  # False: each thread adds into elements no other thread does (_block_loop)
        self.in_unit_range: set[str] = set()  # values in [-1, 1]: sin and cos results

    def pointwise(self, op: str, *args: Value) -> Value:
        if self.fast_trig and op in FAST_TRIG and args[0].dtype == torch.float32:
            x = args[0]
            if x.text in self.in_unit_range:  # cos(cos(x)): the outer one is cheaper, and needs no check
                result = self.assign(f"{UNIT_TRIG[op]}({x})", torch.float32)
            else:
                self.writer.line(f"out_of_range |= !(std::abs({x}) <= FAST_TRIG_LIMIT);")
                result = self.assign(f"{FAST_TRIG[op]}({x})", torch.float32)
            self.in_unit_range.add(result.text)
            return result
        return super().pointwise(op, *args)

    def type_name(self, dtype: torch.dtype) -> str:
        return COMPUTE_TYPES[dtype]

    def declaration(self, name: str, expr: str, dtype: torch.dtype) -> str:
        return f"{self.type_name(dtype)} {name} = {expr};"

    def size_value(self, text: str, dtype: torch.dtype) -> Value:
        return Value(f"static_cast<{self.type_name(dtype)}>{text}", dtype)

    def constant(self, value: bool | int | float, dtype: torch.dtype) -> Value:
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, float) and not math.isfinite(value):
            text = "NAN" if math.isnan(value) else "INFINITY" if value > 0 else "-INFINITY"
        elif isinstance(value, float):
            text = repr(value) + ("f" if dtype == torch.float32 else "")
        else:  # typed, so templates like python_remainder(a, b) see one type
            text = str(value) if dtype == torch.int32 else f"{self.type_name(dtype)}({value})"
        return Value(f"({text})" if text.startswith("-") else text, dtype, constant=True)

    def to_dtype(self, x: Value, dtype: torch.dtype) -> Value:
        if x.dtype == dtype:
            return x
        return self.assign(f"static_cast<{self.type_name(dtype)}>({x})", dtype)

    def round_to(self, x: Value, dtype: torch.dtype) -> Value:
        if dtype == torch.bfloat16:
            return self.assign(f"bf16_to_float(float_to_bf16({x}))", x.dtype)
        return self.assign(f"static_cast<float>(static_cast<_Float16>({x}))", x.dtype)

    def load(self, param: str, dtype: torch.dtype, index: str, level: Level, gathered: bool = False) -> Value:
        text = f"{param}[{index}]"
        if dtype == torch.bfloat16:
            text = f"bf16_to_float({text})"
        elif dtype == torch.float16:
            text = f"static_cast<float>({text})"
        return self.assign(text, torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype)

    def store(self, param: str, dtype: torch.dtype, index: str, value: Value, level: Level) -> None:
        text = value.text
        if dtype == torch.bfloat16:
            text = f"float_to_bf16({text})"
        elif dtype != value.dtype:
            text = f"static_cast<{STORAGE_TYPES[dtype]}>({text})"
        self.writer.line(f"{param}[{index}] = {text};")

    def store_at(self, param: str, dtype: torch.dtype, offset: Value, value: Value, combine: str) -> None:
        if combine == "replace":  # the loop runs in order: of two writes to one element the last stays
            self.store(param, dtype, offset.text, value, "element")
        elif combine == "add" and dtype in ATOMIC_DTYPES and self.atomic_adds:  # the loop may run on many threads
            # An atomic add of 0 changes nothing (but a -0.0 target's sign) and costs as much as any:
            # a max pool's backward adds 0 for 8 of the 9 places in each 3x3 window.
            self.writer.line(f"if ({value} != 0) {{")
            with self.writer.indent():
                self.writer.line("#pragma omp atomic")
                self.writer.line(f"{param}[{offset}] += static_cast<{STORAGE_TYPES[dtype]}>({value});")
            self.writer.line("}")
        else:  # read, combine and write back, in a loop that runs on one thread
            old = self.load(param, dtype, offset.text, "element")
            op = SCATTER_COMBINE[combine] if value.dtype != torch.bool else BOOL_ARITHMETIC[SCATTER_COMBINE[combine]]
            self.store(param, dtype, offset.text, self.pointwise(op, old, value), "element")

    def reduction_init(self, op: str, dtype: torch.dtype) -> str:
        acc = self.fresh("acc")
        init = self.constant(reduction_identity(op, dtype), dtype)
        self.writer.line(f"{self.type_name(dtype)} {acc} = {init};")
        if op in INDEX_REDUCTIONS:  # no position yet: the row's first element is taken whatever it is
            self.writer.line(f"int64_t {acc}_index = -1;")
        return acc

    def reduction_update(self, acc: str, op: str, value: Value) -> None:
        if op in INDEX_REDUCTIONS:
            self.writer.line(f"{REDUCE[op].format(acc=acc, value=value, position=self._row_position())};")
        else:
            self.writer.line(f"{acc} = {REDUCE[op].format(acc=acc, value=value)};")

    def reduction_result(self, acc: str, op: str, dtype: torch.dtype) -> Value:
        return Value(f"{acc}_index" if op in INDEX_REDUCTIONS else acc, dtype)

    def scan_init(self, op: str, dtype: torch.dtype) -> str:
        return self.reduction_init(SCAN_REDUCTION[op], dtype)

    def scan_update(self, acc: str, op: str, value: Value, dtype: torch.dtype) -> Value:
        # the sweep visits the row in order (no `omp simd`: see `sweep`), so the running value is
        # the scan's result at this element
        step = SCAN_STEP.get(op) or f"{{acc}} = {REDUCE[SCAN_REDUCTION[op]]}"
        self.writer.line(step.format(acc=acc, value=value, position=self._row_position()) + ";")
        return self.assign(f"{acc}_index" if op in INDEX_SCANS else acc, dtype)

    def declare_row_cache(self, node: Node) -> None:
        # one buffer per thread, kept between rows and calls: rows too long for the stack fit
        t, name = self.type_name(compute_dtype(node.meta.dtype)), f"cache_{node.name}"
        self.writer.line(f"static thread_local std::vector<unsigned char> {name}_bytes;")
        self.writer.line(f"{t}* __restrict__ {name} = row_cache<{t}>({name}_bytes, {self.sizes.row_length});")

    def write_row_cache(self, node: Node, value: Value) -> None:
        self.writer.line(f"cache_{node.name}[{self._row_position()}] = {value};")

    def read_row_cache(self, node: Node) -> Value:
        return self.assign(f"cache_{node.name}[{self._row_position()}]", compute_dtype(node.meta.dtype))

    def _row_position(self) -> str:
        """Which element of the row the sweep is at, counted from 0."""
        outer, inner = self._split_reduced_dims()
        if not outer:
            return self.rvar
        return f"ro * {math.prod(self.sizes.domain[d] for d in inner)} + ri"

    @contextlib.contextmanager
    def sweep(self, accumulators: list[tuple[str, str]]) -> Iterator[None]:
        # argmax/argmin keep a position beside their value, which `omp simd` has no reduction for,
        # and a scan's running value is a result at every element: a sweep with one visits its row
        # in order (argmax: so that of equal values the first stays)
        pragma = None
        if all(op in OMP_REDUCTION for _, op in accumulators):
            pragma = "#pragma omp simd" + "".join(f" reduction({OMP_REDUCTION[op]}:{acc})" for acc, op in accumulators)
        with self.reduced_loops(pragma):
            yield

    @contextlib.contextmanager
    def reduced_loops(self, pragma: str | None = None) -> Iterator[None]:
        """The loops over the reduced dims of one row, `pragma` before the innermost one."""
        outer, inner = self._split_reduced_dims()
        if not outer:
            if pragma:
                self.writer.line(pragma)
            with self.loop(self.rvar, self.sizes.row_length):
                yield
            return
        # Reduced dims that are not next to each other (BatchNorm's N and H, W): one loop over
        # the outer ones, an inner vectorized loop over the last run of neighbours, so indices are
        # `ro * stride + ri` instead of one flat index taken apart with / and % per element.
        with self.loop("ro", math.prod(self.sizes.domain[d] for d in outer)):
            if pragma:
                self.writer.line(pragma)
            with self.loop("ri", math.prod(self.sizes.domain[d] for d in inner)):
                yield

    def reduced_index(self, sizes: tuple[Extent, ...], strides: tuple[Extent, ...]) -> str | None:
        outer, inner = self._split_reduced_dims()
        if not outer:
            return super().reduced_index(sizes, strides)
        at = {d: i for i, d in enumerate(self.kernel.reduction_dims)}  # dim -> its place in `sizes`
        parts = []
        for var, dims in (("ro", outer), ("ri", inner)):
            terms = index_terms(tuple(sizes[at[d]] for d in dims), tuple(strides[at[d]] for d in dims))
            if terms:
                parts.append(render_index(var, terms, self.floordiv))
        return " + ".join(parts) or None

    def _split_reduced_dims(self) -> tuple[list[int], list[int]]:
        """(outer, inner) reduced dims longer than 1: inner is the last run of neighbouring dims,
        or just the last dim when an input is broadcast within that run."""
        reduced = [d for d in self.kernel.reduction_dims if self.kernel.domain[d] != 1]
        split = len(reduced) - 1
        while split > 0 and reduced[split - 1] == reduced[split] - 1:
            split -= 1
        if split == 0 and len(reduced) > 1 and self._taken_apart(tuple(reduced)):
            split = len(reduced) - 1
        return reduced[:split], reduced[split:]

    def _taken_apart(self, dims: tuple[int, ...]) -> bool:
        """Whether an input's offset along `dims` needs / and % of one flat index there (an operand
        broadcast over some of them, as in `sum(a[:, :, None] * b[:, None, :], (1, 2))`): a
        nested loop then indexes it with its own loop variables, and the inner loop vectorizes."""
        domain = self.kernel.domain
        for buffer in self.kernel.inputs:
            strides = self.sizes.strides(buffer.node.meta, domain, param_name(buffer.node, False))
            terms = index_terms(tuple(self.sizes.domain[d] for d in dims), tuple(strides[d] for d in dims))
            if len(terms) > 1 or any(div != 1 or mod is not None for div, mod, _ in terms):
                return True
        return False

    @contextlib.contextmanager
    def loop(self, var: str, size: Extent, start: str = "0") -> Iterator[None]:
        self.writer.line(f"for (int64_t {var} = {start}; {var} < {size}; ++{var}) {{")
        with self.writer.indent():
            yield
        self.writer.line("}")


class TiledCppOps(LaneOps, CppOps):
    """C++ for an outer reduction, many rows at once (cpp_tiled.py)."""


def kernel_source(kernel: Kernel, dynamic: bool = False) -> CodeWriter:
    """The kernel's C++ function, each line with the nodes it was written for. `dynamic`: sizes
    are arguments (see `sizes.py`)."""
    ops = CppOps(kernel, dynamic)
    w = ops.writer
    for node in kernel.nodes:
        with w.origin(node):
            w.line(f"// {provenance_comment(node)}")
    params = [f"const {STORAGE_TYPES[b.dtype]}* __restrict__ {param_name(b.node, False)}"
              for b in kernel.inputs]
    params += [f"{STORAGE_TYPES[b.dtype]}* __restrict__ {param_name(b.node, True)}" for b in kernel.outputs]
    params += [f"int64_t {a.param}" for a in ops.sizes.arguments(input_params(kernel), output_params(kernel))]
    w.line(f'extern "C" void {kernel.name}({", ".join(params)}) {{')
    with w.indent():
        for param, out, node in in_place_params(kernel):  # derived from the output's pointer: no __restrict__ broken
            w.line(f"const {STORAGE_TYPES[node.meta.dtype]}* {param} = {out};  // {node.name} is written in place")
        parallel = _parallel_clause(ops.sizes)
        scatter = next((n for n in kernel.nodes if OPS[n.op].kind == "scatter"), None)
        if kernel.kind == "pointwise" and _uses_fast_trig(kernel) and scatter is None:
            _blocked_loop(ops, parallel)
        elif tiles_rows(kernel):
            tiled = TiledCppOps(kernel, dynamic)
            BodyWriter(kernel, tiled).write()
            write_tiled_rows(w, tiled, parallel)
        elif scatter is not None and parallel is not None and (blocks := _apart_blocks(kernel, scatter)):
            _block_loop(ops, blocks, parallel)
        else:
            if scatter is not None:  # threads only with atomic adds, never simd lanes (two may hit one element)
                if parallel is not None and _atomic_adds(scatter):
                    w.line(f"#pragma omp parallel for{parallel}")
            elif kernel.kind == "pointwise":
                w.line("#pragma omp simd" if parallel is None else f"#pragma omp parallel for simd{parallel}")
            elif parallel is not None:
                w.line(f"#pragma omp parallel for{parallel}")
            with ops.loop(ops.xvar, ops.sizes.rows):
                BodyWriter(kernel, ops).write()
    w.line("}")
    return w


def _parallel_clause(sizes: KernelSizes) -> str | None:
    """None if one thread does better than sharing the loop over rows among threads; else the
    clauses of its `omp parallel for`: none, or an `if` when the size is known only at run time."""
    numel = math.prod(sizes.domain)
    if sizes.rows == 1:
        return None
    if isinstance(numel, int):
        return "" if numel >= PARALLEL_THRESHOLD else None
    return f" if(parallel: {numel} >= {PARALLEL_THRESHOLD})"


def _atomic_adds(scatter: Node) -> bool:
    """Does this store_at combine by `omp atomic` adds (so that its loop may run on many threads)?
    Other combines run their loop in order on one thread, as eager's CPU kernels do."""
    return scatter.args[3] == "add" and scatter.meta.dtype in ATOMIC_DTYPES


def _apart_blocks(kernel: Kernel, scatter: Node) -> int:
    """How many blocks of the loop over a scatter-add's values write apart from one another
    (codegen/scatter_blocks.py); 0 where they might meet, or one block would hold them all."""
    position, domain = scatter.args[1], kernel.domain
    if not (_atomic_adds(scatter) and isinstance(position, Node) and position.meta.shape == domain
            and kernel.loop_order == tuple(range(len(domain)))):
        return 0
    blocks = math.prod(domain[:independent_blocks(position, domain)])
    return blocks if blocks > 1 else 0


def _block_loop(ops: CppOps, blocks: int, parallel: str) -> None:
    """The values' loop in `blocks` runs of neighbouring elements, one thread each: their adds
    never meet, so they are plain adds, not atomics."""
    each = ops.sizes.rows // blocks
    ops.atomic_adds = False
    ops.writer.line(f"#pragma omp parallel for{parallel}")
    with ops.loop("block", blocks), ops.loop(ops.xvar, f"block * {each} + {each}", start=f"block * {each}"):
        BodyWriter(ops.kernel, ops).write()


def _uses_fast_trig(kernel: Kernel) -> bool:
    return any(n.op in FAST_TRIG and compute_dtype(n.meta.dtype) == torch.float32 for n in kernel.nodes)


def _blocked_loop(ops: CppOps, parallel: str | None) -> None:
    """A pointwise loop in blocks: each block runs with fast_sin/fast_cos, checking their
    arguments, and runs again with std::sin/std::cos if one was out of their range."""
    w, x, numel = ops.writer, ops.xvar, ops.sizes.rows
    if parallel is not None:
        w.line(f"#pragma omp parallel for{parallel}")
    w.line(f"for (int64_t block = 0; block < {numel}; block += {FAST_TRIG_BLOCK}) {{")
    with w.indent():
        w.line(f"const int64_t end = std::min<int64_t>(block + {FAST_TRIG_BLOCK}, {numel});")
        w.line("int out_of_range = 0;  // an int: GCC vectorizes | reductions of ints, not of bools")
        w.line("#pragma omp simd reduction(|:out_of_range)")
        fast = CppOps(ops.kernel, ops.sizes.dynamic, fast_trig=True)
        with fast.loop(x, "end", start="block"):
            BodyWriter(ops.kernel, fast).write()
        w.extend(fast.writer)
        w.line("if (out_of_range) {  // this block again, exactly")
        with w.indent(), ops.loop(x, "end", start="block"):
            BodyWriter(ops.kernel, ops).write()
        w.line("}")
    w.line("}")


def check_dtypes(kernels: list[Kernel]) -> None:
    for kernel in kernels:
        for node in [b.node for b in kernel.inputs] + kernel.nodes:
            if node.meta.dtype not in STORAGE_TYPES:
                raise CodegenError(f"cpp backend does not support {node.meta.dtype} ({node.name})")


def module_source(kernel_texts: list[str]) -> str:
    kernels = "\n\n".join(kernel_texts)
    helpers = helpers_used(cpp_prelude.HELPERS, "\n\n", cpp_prelude.DEFINITION, kernels)
    return "\n\n".join([cpp_prelude.HEADERS.strip(), *helpers, kernels]) + "\n"


def load_kernels(source: str, kernels: list[Kernel], dynamic: bool) -> dict[str, Callable[..., None]]:
    """Compile (or find in the cache) and load the module; one ctypes function per kernel,
    its argument types fixed once here so each call only converts the pointers."""
    try:
        library = loader.load_cpp(source)
    except loader.CompileError as error:
        raise CodegenError(f"cpp backend could not build its kernels: {error}") from error
    functions = {}
    for kernel in kernels:
        function = getattr(library, kernel.name)
        sizes = KernelSizes(kernel, dynamic).arguments(input_params(kernel), output_params(kernel))
        pointers = len(kernel.inputs) + len(kernel.outputs)
        function.argtypes = [ctypes.c_void_p] * pointers + [ctypes.c_int64] * len(sizes)
        function.restype = None
        functions[kernel.name] = function
    return functions


def call_source(kernel: Kernel, buffers: list[str], sizes: list[str]) -> str:
    """The wrapper line that launches the kernel on the named buffers (and runtime sizes)."""
    return f"{kernel.name}({', '.join([f'{b}.data_ptr()' for b in buffers] + sizes)})"
