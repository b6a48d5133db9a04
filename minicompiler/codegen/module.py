"""`generate(schedule, backend) -> CompiledModule`: kernel sources, a wrapper, and the callable."""

from __future__ import annotations

import functools
import linecache
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from minicompiler.autograd.shape_rules import convolution_grads
from minicompiler.codegen import cpp, triton
from minicompiler.codegen.body import input_params, output_params
from minicompiler.codegen.common import CodegenError, CodeWriter
from minicompiler.codegen.cpp_tiled import LANES, tiles_rows
from minicompiler.codegen.same_code import same_code, shared_note
from minicompiler.codegen.wrapper import Launch, graph_cuda_device, wrapper_source
from minicompiler.fuse.schedule import Kernel, Schedule
from minicompiler.ir.graph import SourceLoc
from minicompiler.ir.ops import torch_call_vjps
from minicompiler.ir.printer import OPS_NAMESPACE
from minicompiler.ir.recorded_calls import recorded_vjps
from minicompiler.runtime import loader, parallel_compile
from minicompiler.runtime.allocation import empty_strided_cuda
from minicompiler.runtime.relayout import channels_last_copy, laid_out, reinterpret_tensor
from minicompiler.runtime.triton_launch import FastLauncher

Backend = Literal["cpp", "triton"]


@dataclass
class CompiledModule:
    """A schedule turned into code: call it with the graph's input tensors."""

    backend: Backend
    wrapper_source: str
    kernel_sources: dict[str, str]  # kernel name -> its generated function
    module_source: str  # the whole C++ file or Triton module the kernels were built from
    line_origins: dict[tuple[str, int], list[SourceLoc]]  # (kernel, line number) -> user lines
    schedule: Schedule
    notes: list[str]  # for the report: how many buffers reuse dead ones' memory, which calls are gathered
    _call: Callable[[list[torch.Tensor]], Any] = field(repr=False)
    # Triton kernels compiling in worker processes, waited for at the first call
    _compiling: parallel_compile.Compiling | None = field(default=None, repr=False)
    cuda_device: torch.device | None = None  # the GPU all its tensors are on, if they are on one

    def __call__(self, inputs: list[torch.Tensor]) -> Any:
        if self._compiling is not None:
            self._compiling, compiling = None, self._compiling
            compiling.wait()  # a kernel that failed there compiles at its launch, and raises its error
        if self.cuda_device is None or self.cuda_device.index is None:  # ("cuda": whichever is current)
            return self._call(inputs)
        # Triton launches, and the wrapper makes its buffers, on the current GPU: the graph's
        with torch.cuda._DeviceGuard(self.cuda_device.index):
            return self._call(inputs)

    @property
    def source(self) -> str:
        """Everything that runs, for display: the kernels' module, then the wrapper."""
        return f"{self.module_source}\n\n# ---- wrapper ----\n{self.wrapper_source}"


def generate(schedule: Schedule, backend: Backend = "cpp", dynamic: bool = False,
             launch_configs: dict[str, dict[str, int]] | None = None, consume_inputs: bool = False) -> CompiledModule:
    """Generate, compile and load the code for `schedule` with the `cpp` or `triton` backend.

    dynamic=True: kernels take their sizes as arguments instead of having them baked in, so the
    same kernel source (and compiled library, and JIT entry) serves every size of one pattern of
    rank, dtypes and broadcasting (see `codegen/sizes.py`); the wrapper reads the sizes from its
    tensors' shapes at call time. `launch_configs`: Triton block sizes per kernel name, from
    autotuning (`runtime/autotune.py`); the kernels' text does not depend on them.
    `consume_inputs`: the wrapper empties the list it is called with (see `wrapper_source`)."""
    if backend not in ("cpp", "triton"):
        raise CodegenError(f"unknown backend {backend!r}: use 'cpp' or 'triton'")
    devices = {n.meta.device.type for n in schedule.graph.nodes if n.meta is not None}
    kernels = schedule.kernels
    decisions: list[str] = []  # the report's notes on how the kernels were written
    if backend == "cpp":
        if devices - {"cpu"}:
            raise CodegenError(f"cpp backend runs on CPU tensors, got {sorted(devices)}{_first_not_on(schedule, 'cpu')}"
                               ": use 'triton'")
        cpp.check_dtypes(kernels)
        writers = {k.name: cpp.kernel_source(k, dynamic) for k in kernels}
        module_text = cpp.module_source(["\n".join(w.lines) for w in writers.values()])
        launchers: dict[str, Any] = cpp.load_kernels(module_text, kernels, dynamic) if kernels else {}
        launch: Launch = cpp.call_source
        if tiled := [k.name for k in kernels if tiles_rows(k)]:
            decisions.append(f"{len(tiled)} outer reduction{'s' * (len(tiled) > 1)} swept {LANES} rows at once "
                             f"(their rows lie side by side in memory, codegen/cpp_tiled.py): {', '.join(tiled)}")
    else:
        _check_triton_can_run(devices, schedule)
        triton.check_supported(kernels)
        writers = {k.name: triton.kernel_source(k, dynamic) for k in kernels}
        # a repeated block's kernels are one kernel under other names: defined and compiled once
        code_of = same_code({name: "\n".join(w.lines) for name, w in writers.items()},
                            {k.name: tuple(n.meta.dtype for _, n in input_params(k) + output_params(k))
                             for k in kernels})
        launched = kernels  # each launches its first twin's code, with its own block sizes
        kernels = [k for k in kernels if code_of[k.name] == k.name]
        decisions += filter(None, [shared_note(code_of)])
        module_text = triton.module_source(["\n".join(writers[k.name].lines) for k in kernels])
        module = loader.load_python_module(module_text) if kernels else None
        launchers = {k.name: _launcher(getattr(module, k.name)) for k in kernels}
        launch = functools.partial(triton.call_source, dynamic=dynamic, configs=launch_configs, code_of=code_of)
    wrapper_text, constants, notes = wrapper_source(schedule, launch, dynamic, consume_inputs)
    notes += decisions
    compiling = None
    if backend == "triton" and kernels and not dynamic and not parallel_compile.interpreting():
        compiling, note = _compile_in_workers(module, launched, code_of, launch_configs)
        notes += [note] if note else []
    namespace = {"torch": torch, "ops": OPS_NAMESPACE, **launchers, **constants,
                 "channels_last_copy": channels_last_copy, "reinterpret_tensor": reinterpret_tensor,  # relayout.py
                 "laid_out": laid_out,
                 "empty_strided_cuda": empty_strided_cuda,
                 "torch_call_vjps": torch_call_vjps, "recorded_vjps": recorded_vjps,
                 "convolution_grads": convolution_grads}
    return CompiledModule(
        backend=backend,
        wrapper_source=wrapper_text,
        kernel_sources={name: "\n".join(w.lines) + "\n" for name, w in writers.items()},
        module_source=module_text,
        line_origins=_line_origins(writers),
        schedule=schedule,
        notes=notes,
        _call=_compile_wrapper(wrapper_text, namespace),
        _compiling=compiling,
        cuda_device=graph_cuda_device(schedule),
    )


def _line_origins(writers: dict[str, CodeWriter]) -> dict[tuple[str, int], list[SourceLoc]]:
    origins = {}
    for name, writer in writers.items():
        for number, nodes in enumerate(writer.origins, start=1):
            sources = list(dict.fromkeys(n.source for n in nodes if n.source is not None))
            if sources:
                origins[name, number] = sources
    return origins


def _compile_wrapper(text: str, namespace: dict[str, Any]) -> Callable[[list[torch.Tensor]], Any]:
    # registered with linecache so tracebacks through the wrapper show its lines
    filename = f"<minicompiler wrapper {abs(hash(text)):x}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    exec(compile(text, filename, "exec"), namespace)
    return namespace["call"]


def _compile_in_workers(module: Any, kernels: list[Kernel], code_of: dict[str, str], configs: dict[str, dict[str, int]]
                        | None) -> tuple[parallel_compile.Compiling | None, str | None]:
    """Start compiling the kernels in worker processes, not one by one at their first launch
    (runtime/parallel_compile.py): the workers (None if that is not done) and the report's note.
    A kernel launched as its twin's code (`code_of`; the same buffer dtypes) with other block
    sizes needs a variant of that code of its own: each (code, launch config) is asked for once."""
    by_name = {kernel.name: kernel for kernel in kernels}
    launches = {}
    for kernel in kernels:
        twin = by_name[code_of[kernel.name]]
        dtype_of = {param: node.meta.dtype for param, node in input_params(twin) + output_params(twin)}
        jit_function = getattr(module, twin.name)
        dtypes = [dtype_of[name] for name in jit_function.arg_names if name in dtype_of]
        config = triton.chosen_config(kernel, configs=configs)
        launches.setdefault((twin.name, tuple(sorted(config.items()))), (jit_function, dtypes, config))
    return parallel_compile.precompile(module, list(launches.values()))


def _launcher(kernel: Any) -> Any:
    """What the wrapper's `kernel[grid](...)` calls: the jit function itself under the interpreter,
    else a launcher that skips Triton's per-call argument analysis (runtime/triton_launch.py)."""
    if parallel_compile.interpreting():
        return kernel
    parallel_compile.wait_for_triton_setup()  # begun during capture: done before a kernel is compiled
    return FastLauncher(kernel)


def _first_not_on(schedule: Schedule, device: str) -> str:
    """Which node is elsewhere: the error names it, and the user's line that made it."""
    for node in schedule.graph.nodes:
        if node.meta is not None and node.meta.device.type != device:
            where = f" at {node.source.filename}:{node.source.lineno}" if node.source else ""
            return f" ({node.op} {node.name} is on {node.meta.device}{where})"
    return ""


def _check_triton_can_run(devices: set[str], schedule: Schedule) -> None:
    try:
        import triton as triton_package  # noqa: F401
    except ImportError:
        raise CodegenError("triton backend needs the triton package (pip install triton)") from None
    if parallel_compile.interpreting():
        return  # the interpreter runs kernels on CPU (or GPU) tensors with numpy
    if not torch.cuda.is_available():
        raise CodegenError("triton backend needs a CUDA GPU, or TRITON_INTERPRET=1 to run kernels on the CPU")
    if devices - {"cuda"}:
        raise CodegenError(f"triton backend runs on CUDA tensors, got {sorted(devices)}"
                           f"{_first_not_on(schedule, 'cuda')}")

