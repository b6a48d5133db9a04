"""A/B of one compiler decision on whole models: minicompiler as it is against variants of it, side by side.

    python benchmarks/variants_ab.py bias-race "MiniTransformer (seed 003)" "BERT-base encoder"
    python benchmarks/variants_ab.py whole-reductions "seed 003 CNN" "ResNet-18 b1" --training
    python benchmarks/variants_ab.py attention "MiniTransformer masked" --training --mode reduce-overhead
    python benchmarks/variants_ab.py layout "seed 003 CNN" --training

A variant is minicompiler with a few of its module-level settings changed while a model compiles
(the decisions are made then; the compiled program keeps them). Every variant of one model is
compiled in the same process and timed in interleaved rounds (7 rounds of 10 calls, the order
reversed every other round, medians), so a slow moment of a shared host falls on all of them.
Each row also says what the decision did: the biases moved after their matmul, or the Triton
launches per call. MODEL is a name from minicompiler/bench/zoo.py (a prefix will do). GPU numbers
are only meaningful on a GPU: the decisions compared here are made for one.
Results: benchmarks/results/h200_2026-11-28f/.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

import minicompiler
from minicompiler import pipeline
from minicompiler.bench.compare import _Step
from minicompiler.bench.zoo import CASES, quiet_randomness
from minicompiler.fuse import split_reductions
from minicompiler.replace import attention, bias_after_matmul
from minicompiler.runtime import triton_launch

ROUNDS, CALLS = 7, 10


def _race_from_the_cache(call: Callable[[], object], flush: torch.Tensor, repeats: int = 7) -> float:
    """The bias race as it was before 84ad3fb: five calls per sample, operands left in the L2 cache."""
    del flush
    for _ in range(2):
        call()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        host_start = time.perf_counter()
        start.record()
        for _ in range(5):
            call()
        end.record()
        host_ms = (time.perf_counter() - host_start) * 1e3
        end.synchronize()
        samples.append(max(start.elapsed_time(end), host_ms) / 5)
    return statistics.median(samples)


# decision -> variant -> the settings it changes: (module, attribute, value)
VARIANTS: dict[str, dict[str, list[tuple[Any, str, Any]]]] = {
    "bias-race": {
        "as is": [],
        "race from the cache": [(bias_after_matmul, "_median_ms", _race_from_the_cache)],
        "no bias moved": [(bias_after_matmul, "RACE_MARGIN", float("inf"))],
    },
    "whole-reductions": {
        "as is": [],
        "every input split": [(split_reductions, "WHOLE_INPUT", 0)],
        "every input whole": [(split_reductions, "WHOLE_INPUT", 1 << 62)],
    },
    "attention": {
        "as is": [],
        "SDPA everywhere": [(attention, "_faster_as_written", lambda out: False)],
        "as written everywhere": [(attention, "_chain", lambda out, users: None)],
    },
    "layout": {
        "as is": [],
        "convolutions row-major": [(pipeline, "worth_channels_last", lambda graph: False)],
    },
}


@contextlib.contextmanager
def _changed(settings: list[tuple[Any, str, Any]]) -> Iterator[None]:
    before = [(module, name, getattr(module, name)) for module, name, _ in settings]
    for module, name, value in settings:
        setattr(module, name, value)
    bias_after_matmul._race.cache_clear()  # each variant races for itself
    try:
        yield
    finally:
        for module, name, value in before:
            setattr(module, name, value)


class _Launches:
    """Counts Triton launches through minicompiler's launcher while it is entered."""

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> _Launches:
        self._launch = triton_launch.FastLauncher.launch

        def counted(launcher: Any, grid: Any, *args: Any, **options: Any) -> None:
            self.count += 1
            self._launch(launcher, grid, *args, **options)

        triton_launch.FastLauncher.launch = counted
        return self

    def __exit__(self, *exc: object) -> None:
        triton_launch.FastLauncher.launch = self._launch


def _call_of(module: torch.nn.Module, inputs: tuple, training: bool, mode: str) -> tuple[Callable[[], object], Any]:
    """One call (a training step, or an inference call) of the module compiled now; the compiled module."""
    if training:
        step = _Step(module, lambda m: minicompiler.compile(m, mode=mode), inputs)
        return step, step.model
    compiled = minicompiler.compile(module.eval(), mode=mode)

    def infer() -> None:
        with torch.no_grad():
            compiled(*inputs)

    return infer, compiled


def _biases_moved(compiled: Any) -> int:
    return sum(len(stage.text.splitlines()) for report in compiled.reports for graph in report.graphs
               for stage in graph.stages if stage.name.startswith("bias after matmul"))


def compare(decision: str, name: str, training: bool, mode: str, device: str) -> str:
    case = next(c for c in CASES if c.name.startswith(name))
    built = case.make(device, device == "cpu")
    module = quiet_randomness(built.module)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    calls, facts = {}, {}
    for variant, settings in VARIANTS[decision].items():
        with _changed(settings):
            call, compiled = _call_of(module, built.inputs, training, mode)
            call()  # compiles, with the variant's settings
        for _ in range(3):
            call()
        sync()
        with _Launches() as launches:
            call()
        sync()
        calls[variant] = call
        facts[variant] = f"{launches.count} launches, {_biases_moved(compiled)} biases moved"
    times: dict[str, list[float]] = {variant: [] for variant in calls}
    for round_number in range(ROUNDS):
        for variant in list(calls)[:: 1 if round_number % 2 == 0 else -1]:
            sync()
            start = time.perf_counter()
            for _ in range(CALLS):
                calls[variant]()
            sync()
            times[variant].append((time.perf_counter() - start) / CALLS * 1e3)
    task = ("training" if training else "inference") + ("" if mode == "default" else f", {mode}")
    cells = " | ".join(f"{variant} {statistics.median(t):.3f} ms ({facts[variant]})" for variant, t in times.items())
    return f"{case.name[:28]:28s} {task:26s} {cells}"


def main(arguments: list[str]) -> None:
    if len(arguments) < 2 or arguments[0] not in VARIANTS:
        raise SystemExit(__doc__)
    training = "--training" in arguments
    mode = arguments[arguments.index("--mode") + 1] if "--mode" in arguments else "default"
    models = [a for i, a in enumerate(arguments[1:], start=1)
              if not a.startswith("--") and arguments[i - 1] != "--mode"]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"{decision_line(arguments[0])} on {torch.cuda.get_device_name() if device == 'cuda' else 'the CPU'}")
    for name in models:
        print(compare(arguments[0], name, training, mode, device), flush=True)


def decision_line(decision: str) -> str:
    return f"{decision}: " + ", ".join(VARIANTS[decision])


if __name__ == "__main__":
    main(sys.argv[1:])
