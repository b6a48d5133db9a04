"""Where a compiled training step's backward spends host time, on autograd's side of the call.

    python benchmarks/backward_host_timeline.py "seed 003 CNN" "MLP 1024 (seed 000)"

For eager, eager with an identity Python `autograd.Function` on the output (what a Python node in
the backward costs), and minicompiler default, each `loss.backward()` is cut at: our Function's
backward entered, its generated wrapper started and ended, the backward returned to autograd, and
`loss.backward()` returned. Medians of 30 steps, each from an idle GPU (synchronized before), in
microseconds of host time; once with autograd's device threads (torch's default: a CUDA backward
runs on a thread of its own) and once without (`torch.autograd.set_multithreading_enabled(False)`).
MODEL is a name from minicompiler/bench/zoo.py. Results: benchmarks/results/h200_2026-11-28g/.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

import minicompiler
import minicompiler.codegen.module as codegen_module
from minicompiler.autograd import function as compiled_function
from minicompiler.bench.compare import _Step
from minicompiler.bench.zoo import CASES, quiet_randomness

MARKS: dict[str, float] = {}  # this step's readings: "entered", "wrapper start", "wrapper end", "exited"
_compile_wrapper = codegen_module._compile_wrapper
_backward = compiled_function._CompiledFunction.backward


def _marked_wrapper(text: str, namespace: dict[str, Any]) -> Callable[[list[torch.Tensor]], Any]:
    call = _compile_wrapper(text, namespace)

    def marked(inputs: list[torch.Tensor]) -> Any:
        MARKS["wrapper start"] = time.perf_counter()
        result = call(inputs)
        MARKS["wrapper end"] = time.perf_counter()
        return result

    return marked


def _marked_backward(ctx: Any, *grads: torch.Tensor) -> Any:
    MARKS["entered"] = time.perf_counter()
    result = _backward(ctx, *grads)
    MARKS["exited"] = time.perf_counter()
    return result


class _Identity(torch.autograd.Function):
    """A Python node that does nothing: its backward hands the gradient on."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        MARKS["entered"] = MARKS["wrapper start"] = MARKS["wrapper end"] = MARKS["exited"] = time.perf_counter()
        return grad


COMPILERS: dict[str, Callable[[torch.nn.Module], Callable[..., Any]]] = {
    "eager": lambda module: module,
    "eager + identity Function": lambda module: lambda *args: _Identity.apply(module(*args)),
    "minicompiler": minicompiler.compile,
}
PARTS = [("to our backward", None, "entered"), ("to the wrapper", "entered", "wrapper start"),
         ("wrapper", "wrapper start", "wrapper end"), ("after the wrapper", "wrapper end", "exited"),
         ("back to the caller", "exited", None)]


def timeline(step: _Step, device_threads: bool, sync: Callable[[], None]) -> str:
    samples: dict[str, list[float]] = {name: [] for name, _, _ in [*PARTS, ("total", None, None)]}
    for _ in range(30):
        sync()
        step.optimizer.zero_grad(set_to_none=True)
        loss = step.loss()
        sync()
        MARKS.clear()
        with torch.autograd.set_multithreading_enabled(device_threads):
            start = time.perf_counter()
            loss.backward()
            end = time.perf_counter()
        marks = {None: start, **MARKS}
        samples["total"].append(end - start)
        if "entered" in MARKS:
            for name, first, last in PARTS:
                samples[name].append((marks[last] if last else end) - marks[first])
    return ", ".join(f"{name} {statistics.median(values) * 1e6:.0f}" for name, values in samples.items() if values)


def main(models: list[str]) -> None:
    codegen_module._compile_wrapper = _marked_wrapper
    compiled_function._CompiledFunction.backward = staticmethod(_marked_backward)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    print(f"host us per loss.backward() on {torch.cuda.get_device_name() if device == 'cuda' else 'the CPU'}")
    for model in models:
        case = next(c for c in CASES if c.name.startswith(model))
        built = case.make(device, device == "cpu")
        module = quiet_randomness(built.module)
        for name, compiler in COMPILERS.items():
            step = _Step(module, compiler, built.inputs)
            for _ in range(5):
                step()
            for threads in (True, False):
                print(f"{case.name[:24]:24s} {name:26s} device threads {'on ' if threads else 'off'}: "
                      f"{timeline(step, threads, sync)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["seed 003 CNN"])
