"""The C++ backend: the `ops` calls of a kernel body spelled as C++ (OpenMP loops, one
`extern "C"` function per kernel), compiled with g++ and called through ctypes.

    extern "C" void kernel_cos_cos(const float* __restrict__ in_x, float* __restrict__ out_cos_1) {
        #pragma omp parallel for simd
        for (int64_t x = 0; x < 4194304; ++x) {
            float tmp0 = in_x[x];
            float tmp1 = std::cos(tmp0);
            ...
"""

from __future__ import annotations

import contextlib
import ctypes
import math
from collections.abc import Callable, Iterator

import torch

from minicompiler.codegen.body import BodyWriter, param_name
from minicompiler.codegen.common import (
    CodegenError,
    CodeWriter,
    KernelOps,
    Level,
    Value,
    provenance_comment,
    reduction_identity,
)
from minicompiler.fuse.schedule import Kernel
from minicompiler.runtime import loader

PARALLEL_THRESHOLD = 32768  # fewer elements than this: one thread beats waking OpenMP's team

PRELUDE = r"""
// -fno-finite-math-only (for correct NaN/inf) makes GCC drop __FAST_MATH__, which glibc reads
// to declare the SIMD versions (libmvec) of cos, exp, ...: define it so those loops vectorize.
#ifndef __FAST_MATH__
#define __FAST_MATH__ 1
#endif
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

// torch.maximum/minimum propagate NaN; std::fmax does not.
template <typename T> inline T max_propagate_nan(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> inline T min_propagate_nan(T a, T b) { return (a < b || a != a) ? a : b; }
// ... and as OpenMP reductions, so `omp simd` may vectorize amax/amin loops too
#define REDUCTION_TYPES float, double, int64_t, int32_t, int16_t, int8_t, uint8_t, bool
#pragma omp declare reduction(max_propagate_nan : REDUCTION_TYPES : \
    omp_out = max_propagate_nan(omp_out, omp_in)) initializer(omp_priv = omp_orig)
#pragma omp declare reduction(min_propagate_nan : REDUCTION_TYPES : \
    omp_out = min_propagate_nan(omp_out, omp_in)) initializer(omp_priv = omp_orig)

template <typename T> inline T sign(T x) { return static_cast<T>((T(0) < x) - (x < T(0))); }

// Python's %: the result has the sign of the divisor (C's fmod and % follow the dividend).
template <typename T> inline T python_remainder(T a, T b) {
    T m;
    if constexpr (std::is_floating_point_v<T>) m = std::fmod(a, b); else m = a % b;
    return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}

// bfloat16 is the top half of a float32: widen by shifting, narrow by rounding to nearest even.
inline float bf16_to_float(uint16_t bits) {
    uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &wide, sizeof(value));
    return value;
}
inline uint16_t float_to_bf16(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    if (value != value) return 0x7fc0;
    bits += 0x7fff + ((bits >> 16) & 1);
    return static_cast<uint16_t>(bits >> 16);
}
"""

COMPUTE_TYPES = {
    torch.float32: "float", torch.float64: "double", torch.int64: "int64_t", torch.int32: "int32_t",
    torch.int16: "int16_t", torch.int8: "int8_t", torch.uint8: "uint8_t", torch.bool: "bool",
}
STORAGE_TYPES = {**COMPUTE_TYPES, torch.float16: "_Float16", torch.bfloat16: "uint16_t"}

TEMPLATES = {
    "neg": "-{0}", "abs": "std::abs({0})", "exp": "std::exp({0})", "log": "std::log({0})",
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
}
REDUCE = {"sum": "{acc} + {value}", "amax": "max_propagate_nan({acc}, {value})",
          "amin": "min_propagate_nan({acc}, {value})"}
OMP_REDUCTION = {"sum": "+", "amax": "max_propagate_nan", "amin": "min_propagate_nan"}


class CppOps(KernelOps):
    templates = TEMPLATES
    floordiv, xvar, rvar = "/", "x", "r"

    def type_name(self, dtype: torch.dtype) -> str:
        return COMPUTE_TYPES[dtype]

    def declaration(self, name: str, expr: str, dtype: torch.dtype) -> str:
        return f"{self.type_name(dtype)} {name} = {expr};"

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

    def load(self, param: str, dtype: torch.dtype, index: str, level: Level) -> Value:
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

    def reduction_init(self, op: str, dtype: torch.dtype) -> str:
        acc = self.fresh("acc")
        init = self.constant(reduction_identity(op, dtype), dtype)
        self.writer.line(f"{self.type_name(dtype)} {acc} = {init};")
        return acc

    def reduction_update(self, acc: str, op: str, value: Value) -> None:
        self.writer.line(f"{acc} = {REDUCE[op].format(acc=acc, value=value)};")

    def reduction_result(self, acc: str, op: str, dtype: torch.dtype) -> Value:
        return Value(acc, dtype)

    @contextlib.contextmanager
    def sweep(self, accumulators: list[tuple[str, str]]) -> Iterator[None]:
        reductions = "".join(f" reduction({OMP_REDUCTION[op]}:{acc})" for acc, op in accumulators)
        self.writer.line(f"#pragma omp simd{reductions}")
        size = math.prod(self.kernel.domain[d] for d in self.kernel.reduction_dims)
        with self.loop(self.rvar, size):
            yield

    @contextlib.contextmanager
    def loop(self, var: str, size: int) -> Iterator[None]:
        self.writer.line(f"for (int64_t {var} = 0; {var} < {size}; ++{var}) {{")
        with self.writer.indent():
            yield
        self.writer.line("}")


def kernel_source(kernel: Kernel) -> CodeWriter:
    """The kernel's C++ function, each line with the nodes it was written for."""
    ops = CppOps(kernel)
    w = ops.writer
    for node in kernel.nodes:
        with w.origin(node):
            w.line(f"// {provenance_comment(node)}")
    params = [f"const {STORAGE_TYPES[b.dtype]}* __restrict__ {param_name(b.node, False)}"
              for b in kernel.inputs]
    params += [f"{STORAGE_TYPES[b.dtype]}* __restrict__ {param_name(b.node, True)}" for b in kernel.outputs]
    w.line(f'extern "C" void {kernel.name}({", ".join(params)}) {{')
    with w.indent():
        rows = math.prod(kernel.reduced_shape)
        parallel = math.prod(kernel.domain) >= PARALLEL_THRESHOLD and rows > 1
        if kernel.kind == "pointwise":
            w.line("#pragma omp parallel for simd" if parallel else "#pragma omp simd")
        elif parallel:
            w.line("#pragma omp parallel for")
        with ops.loop(ops.xvar, rows):
            BodyWriter(kernel, ops).write()
    w.line("}")
    return w


def check_dtypes(kernels: list[Kernel]) -> None:
    for kernel in kernels:
        for node in [b.node for b in kernel.inputs] + kernel.nodes:
            if node.meta.dtype not in STORAGE_TYPES:
                raise CodegenError(f"cpp backend does not support {node.meta.dtype} ({node.name})")


def module_source(kernel_texts: list[str]) -> str:
    return PRELUDE.lstrip() + "\n" + "\n\n".join(kernel_texts) + "\n"


def load_kernels(source: str, kernels: list[Kernel]) -> dict[str, Callable[..., None]]:
    """Compile (or find in the cache) and load the module; one ctypes function per kernel,
    its argument types fixed once here so each call only converts the pointers."""
    try:
        library = loader.load_cpp(source)
    except loader.CompileError as error:
        raise CodegenError(f"cpp backend could not build its kernels: {error}") from error
    functions = {}
    for kernel in kernels:
        function = getattr(library, kernel.name)
        function.argtypes = [ctypes.c_void_p] * (len(kernel.inputs) + len(kernel.outputs))
        function.restype = None
        functions[kernel.name] = function
    return functions


def call_source(kernel: Kernel, args: list[str]) -> str:
    """The wrapper line that launches the kernel."""
    return f"{kernel.name}({', '.join(f'{a}.data_ptr()' for a in args)})"
