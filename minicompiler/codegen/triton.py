"""The Triton backend: the `ops` calls of a kernel body spelled as Triton.

A pointwise kernel is a 1-D grid of programs, each over BLOCK elements (masked when the size
is not a multiple of BLOCK):

    @triton.jit
    def kernel_cos_cos(in_x, out_cos_1, BLOCK: tl.constexpr):
        xindex = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        xmask = xindex < 1000
        tmp0 = tl.load(in_x + xindex, mask=xmask)
        ...

A reduction kernel gives each program XBLOCK rows, and sweeps their reduced dims RBLOCK
columns at a time, accumulating [XBLOCK, RBLOCK] partial results in registers (float32 for
float16/bfloat16 data) and folding them along axis 1 after the sweep.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator

import torch

from minicompiler.codegen import orthogonal_polynomials, triton_bessel, triton_prelude, triton_special
from minicompiler.codegen.body import BodyWriter, in_place_params, input_params, output_params, param_name
from minicompiler.codegen.common import (
    CodegenError,
    CodeWriter,
    KernelOps,
    Level,
    Value,
    helpers_used,
    provenance_comment,
    reduction_identity,
)
from minicompiler.codegen.sizes import KernelSizes, Symbol
from minicompiler.fuse.schedule import Kernel
from minicompiler.ir.reductions import INDEX_REDUCTIONS
from minicompiler.ir.scans import INDEX_SCANS, SCAN_REDUCTION
from minicompiler.ir.symbolic import size_hint

MAX_RBLOCK = 4096  # longer rows are swept in chunks
# Measured on an H100 over 4M floats (benchmarks/triton_block_sweep.py): 512 elements per program
# on 2 warps moved 81% of copy bandwidth for cos(cos(x)) and sin(x)+cos(x); 1024 on 4 warps 79-80%.
POINTWISE_BLOCK = 512
# An outer reduction's (fuse/schedule.py) block: 64 neighbouring rows, 16 elements of each at a time
OUTER_RBLOCK = 16
# A row this short (a 3x3 max pool's window) is swept one element at a time, each thread keeping
# its own rows: a [64, 16] block with 9 live columns spread each row's window over threads and
# warps, and folding it took shared memory (ResNet-18's stem pool: 0.30 ms on an H100, eager 0.06)
SHORT_ROW, SHORT_ROW_XBLOCK = 16, 512
# A reduction with few rows takes fewer of them per program, so that there are programs for every
# multiprocessor (two each on an H100's 132). ResNet-18's last batch norms in training (512
# channels of 784 elements, normalized in the kernel that sums them) ran as 8 programs of 64
# channels, 28 us each on the H100. An outer reduction keeps at least 8 neighbouring rows per
# program (32 bytes of float32: a whole memory sector per load) and sweeps further along them.
MANY_PROGRAMS = 256
OUTER_MIN_XBLOCK = 8
POINTWISE_WARPS = 2
# L2 eviction policy for a pointwise kernel's loads of elements no other program reads, e.g.
# "evict_first"; None: Triton's default. On the H100, "evict_first" made cos(cos(x)) over 4M
# floats slower (77% of copy bandwidth instead of 82%; benchmarks/triton_block_sweep.py).
STREAMING_LOADS: str | None = None


TYPES = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.int64: "tl.int64", torch.int32: "tl.int32",
    torch.int16: "tl.int16", torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
}

TEMPLATES = {
    "clone": "{0}", "neg": "-{0}", "abs": "tl.abs({0})", "exp": "tl.exp({0})", "log": "tl.log({0})",
    "sqrt": "tl.sqrt({0})", "rsqrt": "tl.rsqrt({0})", "sin": "tl.sin({0})", "cos": "tl.cos({0})",
    "tan": "_tan({0})", "tanh": "_tanh({0})", "erf": "tl.erf({0})", "log1p": "_log1p({0})",
    "expm1": "_expm1({0})", "reciprocal": "1 / {0}", "floor": "tl.floor({0})", "ceil": "tl.ceil({0})",
    "trunc": "_trunc({0})", "sign": "_sign({0})", "logical_not": "{0} == 0",
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}", "pow": "_pow({0}, {1})",
    "maximum": "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    "minimum": "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)",
    "eq": "{0} == {1}", "ne": "{0} != {1}", "lt": "{0} < {1}", "le": "{0} <= {1}", "gt": "{0} > {1}",
    "ge": "{0} >= {1}", "logical_and": "{0} & {1}", "logical_or": "{0} | {1}",
    "remainder": "_remainder({0}, {1})", "where": "tl.where({0}, {1}, {2})",
    "asin": "_asin({0})", "acos": "_acos({0})", "atan": "_atan({0})", "asinh": "_asinh({0})",
    "acosh": "_acosh({0})", "atanh": "_atanh({0})", "erfc": "1 - tl.erf({0})", "round": "_rint({0})",
    "sigmoid": "1 / (1 + tl.exp(-{0}))",
    "signbit": "_negative({0})", "atan2": "_atan2({0}, {1})",  # signbit: a NaN counts as positive
    "fmod": "{0} % {1}",  # Triton's % is C's: the sign of the dividend, floats too
    **triton_special.TEMPLATES,  # lgamma, digamma, zeta, erfinv, erfcx, ndtri, Bessel I0/I1, ...
    **triton_bessel.TEMPLATES,  # Bessel J, Y, K, Airy Ai
    **orthogonal_polynomials.TRITON_TEMPLATES,  # Chebyshev, Hermite, Laguerre, Legendre
}
# ops whose Triton spelling takes Python numbers as operands; the rest need tensors
TAKES_NUMBERS = frozenset({
    "add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "where", "maximum", "minimum", "reciprocal",
})
UPDATE = {"sum": "{acc} + {value}", "prod": "{acc} * {value}", "amax": "_max_nan({acc}, {value})",
          "amin": "_min_nan({acc}, {value})"}
SCAN_COMBINE = {"cumsum": "_add", "cumprod": "_mul", "cummax": "_max_nan", "cummin": "_min_nan",
                "logcumsumexp": "_log_add_exp", "cummax_index": "_cummax_combine", "cummin_index": "_cummin_combine"}
# store_at's combines: atomics where other lanes and programs may hit the same element
SCATTER = {"replace": "tl.store", "add": "tl.atomic_add", "amax": "tl.atomic_max", "amin": "tl.atomic_min"}
NO_POSITION = 2**63 - 1  # argmax's position before any: every real position is smaller, and wins a tie
# (no tl.prod in Triton: a tl.reduce with a multiply); argmax/argmin fold (value, position) pairs
FOLD = {"sum": "tl.sum({acc}, 1)", "prod": "tl.reduce({acc}, 1, _mul)", "amax": "tl.reduce({acc}, 1, _max_nan)",
        "amin": "tl.reduce({acc}, 1, _min_nan)",
        "argmax": "tl.reduce(({acc}, {acc}_index), 1, _argmax_combine)[1]",
        "argmin": "tl.reduce(({acc}, {acc}_index), 1, _argmin_combine)[1]"}


def _next_power_of_2(n: int) -> int:
    # a symbolic size counts as its hint, unguarded: block sizes are a choice of speed, and a
    # reduction kernel sweeps any row length RBLOCK columns at a time
    return 1 << max(size_hint(n) - 1, 0).bit_length()


def launch_config(kernel: Kernel, dynamic: bool = False) -> dict[str, int]:
    """Block sizes and warps, fixed at generate time: part of the launch line. Blocks shrink to
    fit small sizes, but not sizes a dynamic kernel takes at run time, which may be anything
    (RBLOCK still fits this graph's row length: one JIT entry per power of two it rounds to)."""
    sizes = KernelSizes(kernel, dynamic)
    if kernel.kind == "pointwise":
        numel = math.prod(sizes.domain)
        fit = POINTWISE_BLOCK if isinstance(numel, Symbol) else max(16, _next_power_of_2(numel))
        return {"BLOCK": min(POINTWISE_BLOCK, fit), "num_warps": POINTWISE_WARPS}
    row_length = math.prod(kernel.domain[d] for d in kernel.reduction_dims)
    whole_row = min(MAX_RBLOCK, _next_power_of_2(row_length))
    # rows side by side in memory (an outer reduction): blocks wide across the rows, short along them
    rblock = min(whole_row, OUTER_RBLOCK) if kernel.outer_reduction else whole_row
    xblock = max(1, 1024 // rblock)
    if isinstance(row_length, int) and row_length <= SHORT_ROW:
        rblock, xblock = 1, SHORT_ROW_XBLOCK
    if isinstance(sizes.rows, int):
        xblock = min(_next_power_of_2(sizes.rows), xblock)
        narrowest = OUTER_MIN_XBLOCK if kernel.outer_reduction else 1
        while xblock > narrowest and sizes.rows < MANY_PROGRAMS * xblock:
            xblock //= 2
        if kernel.outer_reduction and rblock > 1:  # as many elements per program sweep as before
            rblock = min(whole_row, max(rblock, 1024 // xblock))
    return {"XBLOCK": xblock, "RBLOCK": rblock, "num_warps": 8 if xblock * rblock >= 2048 else 4}


def candidate_configs(kernel: Kernel, dynamic: bool = False) -> list[dict[str, int]]:
    """Launch configs mode="max-autotune" tries, the default first. Block sizes are constexpr
    arguments, so every candidate launches the same kernel text; a pointwise kernel keeps
    whether it needs a mask (the candidates' blocks divide its size as the default's does)."""
    default = launch_config(kernel, dynamic)
    sizes = KernelSizes(kernel, dynamic)
    if kernel.kind == "pointwise":
        numel = math.prod(sizes.domain)
        fit = default["BLOCK"] if isinstance(numel, Symbol) else max(16, _next_power_of_2(numel))
        options = [{"BLOCK": b, "num_warps": w} for b, w in
                   ((256, 2), (512, 2), (512, 4), (1024, 4), (1024, 8), (2048, 8)) if b <= fit]
        unmasked = isinstance(numel, int) and numel % default["BLOCK"] == 0
        options = [c for c in options if (isinstance(numel, int) and numel % c["BLOCK"] == 0) == unmasked]
    else:
        longest = min(MAX_RBLOCK, _next_power_of_2(math.prod(kernel.domain[d] for d in kernel.reduction_dims)))
        rows = sizes.rows if isinstance(sizes.rows, int) else 1 << 20
        options = [{"XBLOCK": x, "RBLOCK": r, "num_warps": w}
                   for r in dict.fromkeys((longest, max(16, longest // 4))) for x in (1, 4, 16) for w in (4, 8)
                   if x <= _next_power_of_2(rows) and x * r <= 8192]
    return [default] + [c for c in options if c != default]


class TritonOps(KernelOps):
    templates = TEMPLATES
    floordiv, xvar, rvar = "//", "xindex", "rindex"

    def type_name(self, dtype: torch.dtype) -> str:
        return TYPES[dtype]

    def declaration(self, name: str, expr: str, dtype: torch.dtype) -> str:
        return f"{name} = {expr}"

    def pointwise(self, op: str, *args: Value) -> Value:
        if all(a.constant for a in args) or op not in TAKES_NUMBERS:
            args = tuple(self.tensor(a) for a in args)
        return super().pointwise(op, *args)

    def tensor(self, x: Value) -> Value:
        """A Python-number constant as a one-element tensor (tl functions take tensors)."""
        return self.assign(f"tl.full([1], {x}, {self.type_name(x.dtype)})", x.dtype) if x.constant else x

    def size_value(self, text: str, dtype: torch.dtype) -> Value:
        # a scalar: Triton promotes it with the tensor it meets; cast so it is `dtype` already
        return self.assign(f"tl.full([1], {text}, {self.type_name(dtype)})", dtype)

    def constant(self, value: bool | int | float, dtype: torch.dtype) -> Value:
        if isinstance(value, float) and not math.isfinite(value):
            text = f'float("{value}")'
        else:
            text = repr(value)
        return Value(f"({text})" if text.startswith("-") else text, dtype, constant=True)

    def to_dtype(self, x: Value, dtype: torch.dtype) -> Value:
        if x.dtype == dtype:
            return x
        x = self.tensor(x)
        if dtype == torch.bool:
            return self.assign(f"{x} != 0", dtype)
        return self.assign(f"{x}.to({self.type_name(dtype)})", dtype)

    def round_to(self, x: Value, dtype: torch.dtype) -> Value:
        return self.assign(f"{self.tensor(x)}.to({self.type_name(dtype)}).to(tl.float32)", x.dtype)

    @functools.cached_property
    def full_blocks(self) -> bool:
        """A pointwise kernel whose size is a multiple of its block: no lane is ever out of range,
        so loads and stores need no mask (and the compiler need not check one per element)."""
        rows = self.sizes.rows
        return (self.kernel.kind == "pointwise" and isinstance(rows, int)
                and rows % launch_config(self.kernel, self.sizes.dynamic)["BLOCK"] == 0)

    def mask(self, index: str) -> str | None:
        """The mask matching the block shape of a pointer at `index`."""
        if self.kernel.kind == "pointwise" or self.rvar not in index:
            return "xmask" if self.xvar in index and not self.full_blocks else None
        return "xmask & rmask" if self.xvar in index else "rmask"

    def gathered_mask(self, level: Level) -> str | None:
        """The mask of a load at computed offsets: every lane past the end may hold any offset."""
        if self.kernel.kind == "pointwise":
            return None if self.full_blocks else "xmask"
        return "xmask & rmask" if level == "element" else "xmask"

    def load(self, param: str, dtype: torch.dtype, index: str, level: Level, gathered: bool = False) -> Value:
        mask = self.gathered_mask(level) if gathered else self.mask(index)
        if gathered:
            # Lanes past the end read offset 0, a real element, unmasked: on the H200 (Triton 3.6) a
            # masked load at computed offsets in a reduction block of 4+ elements per thread read
            # wrong elements for valid lanes of a partly masked warp (a max pool's gradient, gathered:
            # benchmarks/results/h200_2026-11-28g/max_pool_gather_bug.txt). The lanes' values are
            # never used: their stores and accumulations are masked. (An offset read from one element
            # is a scalar: `where` makes it a block of the mask's shape.)
            index = f"tl.where({mask}, {index}, 0)" if mask else f"{index} + 0 * {self.block_index(level)}"
            mask = None
        options = [f"mask={mask}"] if mask else []
        if self.kernel.kind == "pointwise" and index == self.xvar and STREAMING_LOADS:
            # each element is read once, by one program: no point keeping it in L2
            options.append(f'eviction_policy="{STREAMING_LOADS}"')
        text = f"tl.load({', '.join([f'{param} + {index}', *options])})"
        if dtype in (torch.float16, torch.bfloat16):
            return self.assign(f"{text}.to(tl.float32)", torch.float32)
        return self.assign(text, dtype)

    def block_index(self, level: Level) -> str:
        """An index of the block's whole shape at `level` (times 0, it turns a scalar into a block)."""
        per_element = level == "element" and self.kernel.kind == "reduction"
        return f"({self.xvar} + {self.rvar})" if per_element else self.xvar

    def store(self, param: str, dtype: torch.dtype, index: str, value: Value, level: Level) -> None:
        if self.xvar not in index and self.rvar not in index:  # one element: still a block pointer, to match the mask
            index = f"0 * {self.block_index(level)}"
        value = self.tensor(value)
        text = value.text if dtype == value.dtype else f"{value}.to({self.type_name(dtype)})"
        mask = self.mask(index)
        self.writer.line(f"tl.store({param} + {index}, {text}{f', mask={mask}' if mask else ''})")

    def store_at(self, param: str, dtype: torch.dtype, offset: Value, value: Value, combine: str) -> None:
        # the offset of one element may be a scalar: made a block, to match the mask (as a gathered load's)
        pointer = f"{param} + {offset} + 0 * {self.block_index('element')}"
        value = self.tensor(value)
        text = value.text if dtype == value.dtype else f"{value}.to({self.type_name(dtype)})"
        options = [f"mask={mask}"] if (mask := self.gathered_mask("element")) else []
        if combine != "replace":  # no other memory access is ordered by these: the cheapest atomics
            options.append('sem="relaxed"')
        self.writer.line(f"{SCATTER[combine]}({', '.join([pointer, text, *options])})")

    def reduction_init(self, op: str, dtype: torch.dtype) -> str:
        acc = self.fresh("acc")
        init = self.constant(reduction_identity(op, dtype), dtype)
        self.writer.line(f"{acc} = tl.full([XBLOCK, RBLOCK], {init}, {self.type_name(dtype)})")
        if op in INDEX_REDUCTIONS:  # beside each lane's best value, its position in the row (none yet)
            self.writer.line(f"{acc}_index = tl.full([XBLOCK, RBLOCK], {NO_POSITION}, tl.int64)")
        return acc

    def reduction_update(self, acc: str, op: str, value: Value) -> None:
        # lanes past the end of the row keep the accumulator as it was
        if op in INDEX_REDUCTIONS:  # the better of (best, its position) and (value, rindex)
            best, at = self.fresh("best"), self.fresh("at")
            # (as a block: a value the same for the whole row may be one scalar)
            value = f"tl.broadcast_to({self.tensor(value)}, [XBLOCK, RBLOCK])"
            self.writer.line(f"{best}, {at} = _{op}_combine({acc}, {acc}_index, {value}, {self.rvar})")
            self.writer.line(f"{acc} = tl.where(rmask, {best}, {acc})")
            self.writer.line(f"{acc}_index = tl.where(rmask, {at}, {acc}_index)")
            return
        self.writer.line(f"{acc} = tl.where(rmask, {UPDATE[op].format(acc=acc, value=value)}, {acc})")

    def reduction_result(self, acc: str, op: str, dtype: torch.dtype) -> Value:
        return self.assign(f"{FOLD[op].format(acc=acc)}[:, None]", dtype)

    def scan_init(self, op: str, dtype: torch.dtype) -> str:
        # one running value per row ([XBLOCK, 1]): the scan of the blocks swept so far
        carry = self.fresh("carry")
        init = self.constant(reduction_identity(SCAN_REDUCTION[op], dtype), dtype)
        self.writer.line(f"{carry} = tl.full([XBLOCK, 1], {init}, {self.type_name(dtype)})")
        if op in INDEX_SCANS:
            self.writer.line(f"{carry}_index = tl.full([XBLOCK, 1], -1, tl.int64)")
        return carry

    def scan_update(self, acc: str, op: str, value: Value, dtype: torch.dtype) -> Value:
        # The block's RBLOCK elements scanned among themselves, then each combined with the carry
        # (the blocks before); the carry moves on by the whole block. Lanes past the end of the row
        # come after every real one: they change only the carry after the last block, never read.
        combine = SCAN_COMBINE[op]
        block = self.assign(f"tl.broadcast_to({self.tensor(value)}, [XBLOCK, RBLOCK])", value.dtype)
        if op not in INDEX_SCANS:
            scanned = self.assign(f"tl.associative_scan({block}, 1, {combine})", value.dtype)
            result = self.assign(f"{combine}({acc}, {scanned})", dtype)
            self.writer.line(f"{acc} = {combine}({acc}, tl.reduce({block}, 1, {combine}, keep_dims=True))")
            return result
        at = self.assign(f"tl.broadcast_to({self.rvar}.to(tl.int64), [XBLOCK, RBLOCK])", torch.int64)
        scanned, scanned_at, best, result, whole, whole_at = (
            self.fresh(p) for p in ("scanned", "scanned_at", "best", "at", "whole", "whole_at"))
        self.writer.line(f"{scanned}, {scanned_at} = tl.associative_scan(({block}, {at}), 1, {combine})")
        self.writer.line(f"{best}, {result} = {combine}({acc}, {acc}_index, {scanned}, {scanned_at})")
        self.writer.line(f"{whole}, {whole_at} = tl.reduce(({block}, {at}), 1, {combine}, keep_dims=True)")
        self.writer.line(f"{acc}, {acc}_index = {combine}({acc}, {acc}_index, {whole}, {whole_at})")
        return Value(result, dtype)

    @contextlib.contextmanager
    def sweep(self, accumulators: list[tuple[str, str]]) -> Iterator[None]:
        size = self.sizes.row_length
        w = self.writer
        w.line(f"for roffset in range(0, {size}, RBLOCK):")
        with w.indent():
            w.line(f"{self.rvar} = roffset + rbase")
            w.line(f"rmask = {self.rvar} < {size}")
            yield


def _needs_int64(kernel: Kernel, dynamic: bool) -> bool:
    """Could an index pass 2**31 - 1? (int32 index math is cheaper, so only then int64; a
    dynamic kernel cannot know, so it always uses int64.)"""
    if dynamic:
        return True
    extents = [math.prod(kernel.domain)]
    for buffer in kernel.inputs + kernel.outputs:
        extents.append(sum((s - 1) * st for s, st in zip(buffer.shape, buffer.strides, strict=True)) + 1)
    return max(extents) >= 2**31


def kernel_source(kernel: Kernel, dynamic: bool = False) -> CodeWriter:
    """The kernel's @triton.jit function, each line with the nodes it was written for. `dynamic`:
    sizes are arguments (see `sizes.py`), not specialized on by the JIT."""
    ops = TritonOps(kernel, dynamic)
    w = ops.writer
    for node in kernel.nodes:
        with w.origin(node):
            w.line(f"# {provenance_comment(node)}")
    params = [param_name(b.node, False) for b in kernel.inputs]
    params += [param_name(b.node, True) for b in kernel.outputs]
    sizes = [a.param for a in ops.sizes.arguments(input_params(kernel), output_params(kernel))]
    config = launch_config(kernel, dynamic)
    params += sizes + [f"{name}: tl.constexpr" for name in config if name != "num_warps"]
    program = "tl.program_id(0).to(tl.int64)" if _needs_int64(kernel, dynamic) else "tl.program_id(0)"
    # Triton compiles a variant per integer argument that is 1 or a multiple of 16: not for sizes
    w.line(f"@triton.jit(do_not_specialize={sizes})" if sizes else "@triton.jit")
    w.line(f"def {kernel.name}({', '.join(params)}):")
    with w.indent():
        for param, out, node in in_place_params(kernel):
            w.line(f"{param} = {out}  # {node.name} is written in place")
        rows = ops.sizes.rows
        if kernel.kind == "pointwise":
            w.line(f"xindex = {program} * BLOCK + tl.arange(0, BLOCK)")
            if not ops.full_blocks:
                w.line(f"xmask = xindex < {rows}")
        else:
            w.line(f"xindex = {program} * XBLOCK + tl.arange(0, XBLOCK)[:, None]")
            w.line(f"xmask = xindex < {rows}")
            w.line("rbase = tl.arange(0, RBLOCK)[None, :]")
        BodyWriter(kernel, ops).write()
    return w


def chosen_config(kernel: Kernel, dynamic: bool = False,
                  configs: dict[str, dict[str, int]] | None = None) -> dict[str, int]:
    """The launch config the wrapper passes: autotuning's choice (`configs`), else `launch_config`."""
    return (configs or {}).get(kernel.name) or launch_config(kernel, dynamic)


def call_source(kernel: Kernel, buffers: list[str], sizes: list[str], dynamic: bool = False,
                configs: dict[str, dict[str, int]] | None = None, code_of: dict[str, str] | None = None) -> str:
    """The wrapper line that launches the kernel: its grid is a number, or, for a dynamic kernel,
    computed from the size variables the wrapper bound (size0, ...). `configs` (kernel name ->
    launch config, from autotuning) overrides `launch_config`. `code_of`: the kernel whose code
    this one is (codegen/same_code.py), launched in its place."""
    config = chosen_config(kernel, dynamic, configs)
    block = config["BLOCK"] if kernel.kind == "pointwise" else config["XBLOCK"]
    rows = KernelSizes(kernel, dynamic).rows
    grid = f"({rows} + {block - 1}) // {block}" if dynamic else str(-(-rows // block))
    options = ", ".join(f"{k}={v}" for k, v in config.items())
    name = (code_of or {}).get(kernel.name, kernel.name)
    return f"{name}[({grid},)]({', '.join(buffers + sizes + [options])})"


def check_supported(kernels: list[Kernel]) -> None:
    for kernel in kernels:
        for node in [b.node for b in kernel.inputs] + kernel.nodes:
            if node.meta.dtype not in TYPES:
                raise CodegenError(f"triton backend does not support {node.meta.dtype} ({node.name})")


def module_source(kernel_texts: list[str]) -> str:
    kernels = "\n\n\n".join(kernel_texts)
    helpers = helpers_used(triton_prelude.HELPERS, "\n\n\n", triton_prelude.DEFINITION, kernels)
    return "\n\n\n".join([triton_prelude.HEADERS.strip(), *helpers, kernels]) + "\n"
