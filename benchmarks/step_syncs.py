"""Does a training step wait for the GPU anywhere? Host-device synchronizations per step, per compiler.

    python benchmarks/step_syncs.py "seed 003 CNN" "ResNet-18 b16"     (names from minicompiler/bench/zoo.py)

A step that synchronizes (an `.item()`, a copy from pageable host memory) makes the host wait for
the GPU's queue, so host time and GPU time add up instead of overlapping. torch's sync debug mode
warns at each one; one step after warm-up is run with it on, for eager and for minicompiler, and
the warnings are counted (with where the first few came from). Then the step is timed back to back
and synchronized after each: medians of 30. CUDA only.
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback
import warnings

import torch

from minicompiler.bench.compare import _Step, compilers
from minicompiler.bench.zoo import CASES, quiet_randomness


def syncs_in_one_step(step: _Step) -> list[str]:
    """Where each synchronization of one call of `step` came from (a short stack each)."""
    seen: list[str] = []

    def record(message: object, *_: object, **__: object) -> None:
        seen.append(f"{str(message)[:80]}\n{''.join(traceback.format_stack(limit=12)[:-2])}")

    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return seen


def median_ms(step: _Step, synchronized: bool) -> float:
    samples = []
    torch.cuda.synchronize()
    for _ in range(30):
        start = time.perf_counter()
        step()
        if synchronized:
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(samples) * 1e3


def main(models: list[str]) -> None:
    for model in models:
        built = next(case for case in CASES if case.name == model).make("cuda", False)
        module = quiet_randomness(built.module)
        for name, compiler in compilers(["default"], torch_compile=False).items():
            step = _Step(module, compiler, built.inputs)
            for _ in range(3):
                step()
            seen = syncs_in_one_step(step)
            print(f"== {model}, {name}: {len(seen)} synchronizations in one step; back to back "
                  f"{median_ms(step, False):.3f} ms, synchronized {median_ms(step, True):.3f} ms per step")
            for where in seen[:3]:
                print(where)


if __name__ == "__main__":
    main(sys.argv[1:])
