"""`--profile`: where one call of a model spends its time, per kernel, extern call and overhead.

torch.profiler sees every aten op (the extern calls: matmul, convolution, ...) and, on a GPU,
every kernel the device ran (Triton's and cuBLAS/cuDNN's, by name). The C++ kernels minicompiler
builds are called through ctypes, which the profiler cannot see: while profiling, each one is
wrapped in a `record_function` range of its own name, in the namespace its wrapper reads (the
wrapper looks its kernels up there on every call, so nothing is regenerated).

Each event is put in one of three groups: `generated` (minicompiler's kernels, named
`kernel_*`; Triton/Inductor kernels on a GPU), `torch` (aten ops and library kernels), and
`overhead` = wall time minus the profiled time: Python, guards, the wrapper, allocation;
on a GPU, the time the device sat idle waiting for launches.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function


def _kernel_namespaces(compiled: Any) -> list[dict[str, Any]]:
    """The namespaces of the generated wrappers behind a minicompiler-compiled callable."""
    function = getattr(compiled, "_compiled", compiled)
    entries = list(getattr(function, "cache", []))
    entries += [e for segment in getattr(function, "resume_cache", {}).values() for e in segment]
    entries += [v for e in list(entries) for v in e.variants.values()]
    namespaces = []
    for entry in entries:
        for artifact in entry.compiled.artifacts.values():
            call = getattr(artifact, "_call", None)
            if call is not None and hasattr(call, "__globals__"):
                namespaces.append(call.__globals__)
    return namespaces


@contextlib.contextmanager
def kernels_recorded(compiled: Any) -> Iterator[None]:
    """While inside, each C++ kernel behind `compiled` runs in a record_function range."""
    swapped: list[tuple[dict[str, Any], str, Any]] = []
    for namespace in _kernel_namespaces(compiled):
        for name, kernel in list(namespace.items()):
            if name.startswith("kernel_") and type(kernel).__name__ == "_FuncPtr":  # ctypes: C++ kernels
                namespace[name] = _recorded(name, kernel)
                swapped.append((namespace, name, kernel))
    try:
        yield
    finally:
        for namespace, name, kernel in swapped:
            namespace[name] = kernel


def _recorded(name: str, kernel: Callable) -> Callable:
    def run(*args: Any) -> Any:
        with record_function(name):
            return kernel(*args)

    return run


def group_of(name: str) -> str:
    """minicompiler's kernels, Inductor's (Triton kernels; on the CPU its compiled graph's range,
    whose self time is its C++ kernels), or torch's."""
    return "generated" if name.startswith(("kernel_", "triton_", "## Call CompiledFxGraph")) else "torch"


def profile_calls(fn: Callable[[], Any], compiled: Any = None, calls: int = 5, top: int = 12) -> dict[str, Any]:
    """Per call: wall ms, ms per group, and the `top` events by self time (device time on a GPU)."""
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    fn()  # warm (and compiled) outside the profile
    with kernels_recorded(compiled), profile(activities=activities) as prof:
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        if cuda:
            torch.cuda.synchronize()
        wall_ms = (time.perf_counter() - start) * 1e3 / calls
    events = []
    for event in prof.key_averages():
        self_us = event.self_device_time_total if cuda else event.self_cpu_time_total
        on_cpu = getattr(getattr(event, "device_type", None), "name", "CPU") == "CPU"
        if self_us > 0 and not (cuda and on_cpu):  # on a GPU: the kernels, not the ops that launched them
            events.append({"name": event.key, "group": group_of(event.key), "ms": self_us / 1e3 / calls,
                           "count": event.count // calls})
    events.sort(key=lambda e: -e["ms"])
    groups = {"generated": 0.0, "torch": 0.0}
    for event in events:
        groups[event["group"]] += event["ms"]
    groups["overhead"] = max(wall_ms - groups["generated"] - groups["torch"], 0.0)
    return {"wall_ms": wall_ms, "groups_ms": groups, "top": events[:top],
            "time_base": "GPU time (kernels)" if cuda else "CPU self time"}


def format_profile(name: str, profiles: dict[str, dict[str, Any]]) -> str:
    lines = [f"== profile: {name}"]
    for compiler, p in profiles.items():
        g = p["groups_ms"]
        lines.append(f"  {compiler}: {p['wall_ms']:.3f} ms/call = generated {g['generated']:.3f} + torch "
                     f"{g['torch']:.3f} + overhead {g['overhead']:.3f} ({p['time_base']})")
        lines += [f"      {e['ms']:9.3f} ms  x{e['count']:<4} {e['group']:9} {e['name'][:70]}" for e in p["top"]]
    return "\n".join(lines)
