"""Per-call guard cost, before and after the generated guard function (runtime/guard_code.py).

    python benchmarks/guard_overhead.py [--quick]

For each model: how many guards and graph inputs its cache entry has, and the microseconds one
call spends deciding that the entry runs and fetching its inputs, two ways, timed in turn:
  loop       every Guard object checked in a Python loop, then the inputs fetched again
             (what the runtime did before)
  generated  the entry's one generated function, which checks and fetches in one pass
Only the runtime's bookkeeping is timed, not the model, so the numbers hold on CPU and GPU alike.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import minicompiler
from minicompiler.bench.zoo import CASES, Skip
from minicompiler.capture import first_failing_guard


def microseconds(fn, rounds: int = 7, calls: int = 200) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    opts = parser.parse_args()
    print(f"{'model':36} {'guards':>7} {'inputs':>7} {'loop us':>9} {'generated us':>13} {'saved':>7}")
    for case in CASES:
        if not any(s in case.name for s in ("MLP", "MiniTransformer (", "ResNet-18 b1", "CNN", "BERT")):
            continue
        try:
            built = case.make("cpu", opts.quick)
        except Skip as reason:
            print(f"{case.name:36} skipped: {reason}")
            continue
        compiled = minicompiler.compile(built.module.eval(), backend="eager")  # guards are the same for any backend
        with torch.no_grad():
            compiled(*built.inputs)
        entry = compiled._compiled.cache[0]
        args: tuple = built.inputs
        loop = lambda e=entry, a=args: (first_failing_guard(e.guards, a, {}), e.captured.fetch_inputs(a, {}))
        generated = lambda e=entry, a=args: e.check_and_fetch(a, {})
        before, after = [], []
        for _ in range(3):  # in turn, so a busy moment of the machine falls on both
            before.append(microseconds(loop))
            after.append(microseconds(generated))
        b, a = statistics.median(before), statistics.median(after)
        print(f"{case.name:36} {len(entry.guards):7} {len(entry.captured.input_sources):7} {b:9.1f} {a:13.1f} "
              f"{1 - a / b:6.0%}")


if __name__ == "__main__":
    main()
