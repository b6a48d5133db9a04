"""What does one training step do on the host, counted: eager against minicompiler, op by op.

    python benchmarks/step_census.py "MLP 1024 (seed 000)" "seed 003 CNN" [--device cpu] [--no-device-threads]

A host-bound step (small kernels, the GPU waiting on Python and torch's dispatcher) is slower than
eager where it does more on the host. Timings of such a step move by ±10% from machine to machine;
counts do not. For each compiler (eager, minicompiler default) this prints, per training step
(`minicompiler.bench`'s step: forward, weighted-mean loss, backward, SGD with momentum):
- the host time of each phase (forward, loss, backward, optimizer), medians of 50 back-to-back
  steps: in a host-bound step that is where the time goes; and, from an idle GPU, a step's host
  time and the wait at the synchronization after it (the GPU's work the host left queued);
- kernel launches (CUDA runtime and driver launch calls) and the GPU's kernels, per step;
- every torch op called from Python or from autograd (torch.profiler's CPU events), per step,
  for the names whose counts differ between the two compilers: what one does that the other does not.
MODEL is a name from minicompiler/bench/zoo.py. Default device: cuda. `--no-device-threads`: autograd
runs the backward on the calling thread (`torch.autograd.set_multithreading_enabled(False)`).
"""

from __future__ import annotations

import collections
import statistics
import sys
import time
from collections.abc import Callable

import torch

import minicompiler
from minicompiler.bench.compare import _Step
from minicompiler.bench.zoo import CASES, quiet_randomness

STEPS = 10  # profiled steps, after warm-up
PHASES = ("forward", "loss", "backward", "optimizer")
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC")


def phase_times_us(step: _Step, sync: Callable[[], None], repeats: int = 50) -> dict[str, float]:
    """Median host microseconds of each phase over back-to-back steps (no synchronization inside)."""
    samples: dict[str, list[float]] = {phase: [] for phase in PHASES}
    sync()
    for _ in range(repeats):
        marks = [time.perf_counter()]
        step.optimizer.zero_grad(set_to_none=True)
        output = step.model(*step.inputs)
        marks.append(time.perf_counter())
        loss = step.loss_of(output)
        marks.append(time.perf_counter())
        loss.backward()
        marks.append(time.perf_counter())
        step.optimizer.step()
        marks.append(time.perf_counter())
        for phase, start, end in zip(PHASES, marks, marks[1:], strict=False):
            samples[phase].append((end - start) * 1e6)
    sync()
    return {phase: statistics.median(values) for phase, values in samples.items()}


def tail_us(step: _Step, sync: Callable[[], None], repeats: int = 30) -> tuple[float, float]:
    """Medians, from an idle GPU: a whole step's host microseconds, and the wait at the
    synchronization after it (the GPU's work still queued when the host is done)."""
    hosts, tails = [], []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        step()
        returned = time.perf_counter()
        sync()
        hosts.append((returned - start) * 1e6)
        tails.append((time.perf_counter() - returned) * 1e6)
    return statistics.median(hosts), statistics.median(tails)


def census(step: _Step, sync: Callable[[], None]) -> tuple[collections.Counter, collections.Counter, int, int]:
    """Per step: each torch op's count, the host microseconds of each backward node and of each op
    not called by another op (an op's time includes the ops it calls), launch calls, and the GPU's
    kernels."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    sync()
    with torch.profiler.profile(activities=activities) as profiled:
        for _ in range(STEPS):
            step()
        sync()
    ops: collections.Counter = collections.Counter()
    outer_us: collections.Counter = collections.Counter()
    launches = kernels = 0
    for event in profiled.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernels += 1
        elif event.name in LAUNCHES:
            launches += 1
        elif event.name.startswith(("aten::", "autograd::", "Optimizer.", "torch::autograd")):
            ops[event.name] += 1
            if event.cpu_parent is None or not event.cpu_parent.name.startswith("aten::"):
                outer_us[event.name] += event.cpu_time_total / STEPS
    return ops, outer_us, launches // STEPS, kernels // STEPS


def copied_gradients(step: _Step) -> list[str]:
    """Parameters whose gradient autograd's AccumulateGrad copies instead of keeping (a gradient
    laid out otherwise than its parameter, or one something else still holds), at every step: the
    memory a hook saw the gradient in is not the memory `.grad` ends in."""
    seen: dict[str, int] = {}
    hooks = [p.register_hook(lambda grad, name=name: seen.__setitem__(name, grad.data_ptr()))
             for name, p in step.module.named_parameters() if p.requires_grad]
    step.gradients()
    for hook in hooks:
        hook.remove()
    return [f"{name} {tuple(p.grad.stride())} as {tuple(p.stride())}" for name, p in step.module.named_parameters()
            if name in seen and p.grad is not None and p.grad.data_ptr() != seen[name]]


def main(argv: list[str]) -> None:
    device = argv[argv.index("--device") + 1] if "--device" in argv else "cuda"
    models = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] != "--device")]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    # autograd runs a CUDA backward on a thread of its own; off, on the thread calling backward()
    torch.autograd.set_multithreading_enabled("--no-device-threads" not in argv)
    for model in models:
        torch.manual_seed(0)
        built = next(case for case in CASES if case.name == model).make(device, False)
        module = quiet_randomness(built.module)
        counted = {}
        for name, compiler in {"eager": lambda m: m, "minicompiler": minicompiler.compile}.items():
            step = _Step(module, compiler, built.inputs)
            for _ in range(5):
                step()
            times = phase_times_us(step, sync)
            host, tail = tail_us(step, sync)
            ops, outer_us, launches, kernels = census(step, sync)
            counted[name] = ops
            print(f"== {model}, {name}: {launches} launch calls, {kernels} GPU kernels per step; host us: "
                  + ", ".join(f"{phase} {us:.0f}" for phase, us in times.items())
                  + f", total {sum(times.values()):.0f}; from an idle GPU: host {host:.0f}, then the GPU {tail:.0f}")
            nodes = {op: us for op, us in outer_us.items() if op.startswith("autograd::")}
            calls = {op: us for op, us in outer_us.items() if not op.startswith("autograd::")}
            for kind, times_ in (("backward nodes", nodes), ("ops called from Python or a node", calls)):
                print(f"   host us per step (profiled), {kind}: {sum(times_.values()):.0f}: " + ", ".join(
                    f"{op.split(': ')[-1]} {us:.0f}" for op, us in sorted(times_.items(), key=lambda kv: -kv[1])[:10]))
            print(f"   gradients copied by AccumulateGrad: {copied_gradients(step) or 'none'}")
        eager, ours = counted["eager"], counted["minicompiler"]
        print(f"   torch ops per step ({sum(eager.values()) / STEPS:.0f} eager, {sum(ours.values()) / STEPS:.0f} ours);"
              " where the counts differ (eager -> minicompiler):")
        for op in sorted(set(eager) | set(ours), key=lambda op: -abs(eager[op] - ours[op])):
            if eager[op] != ours[op]:
                print(f"     {op:50s} {eager[op] / STEPS:6.1f} -> {ours[op] / STEPS:6.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
