"""The CPU bar of issue 2: cos(cos(x)) and sin(x)+cos(x) over 4M float32.

    .venv/bin/python benchmarks/cpu_kernels.py [--rounds 15] [--json PATH]

Eager, minicompiler (backend="cpp", the whole call path) and torch.compile (inductor) take
turns, round after round, so that load from other processes on a shared machine hits all
three alike; each time is the minimum and the median over every call of every round. Then,
in fresh processes: the first call with an empty kernel cache (cold compile) and the first
call with the cache that run left behind (warm on-disk hit).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import minicompiler

N = 1 << 22


def double_cosine(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(torch.cos(x))


def sin_plus_cos(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) + torch.cos(x)


FUNCTIONS = {"cos(cos(x))": double_cosine, "sin(x)+cos(x)": sin_plus_cos}

FIRST_CALL = """
import sys, time, torch
sys.path.insert(0, {here!r})
import minicompiler
from cpu_kernels import FUNCTIONS
x = torch.randn({n})
f = minicompiler.compile(FUNCTIONS[{name!r}], backend="cpp")
start = time.perf_counter()
f(x)
print(time.perf_counter() - start)
"""


def call_times(fn, x: torch.Tensor, calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - start)
    return times


def steady_state(fn, rounds: int, calls: int = 10) -> dict[str, dict[str, float]]:
    x = torch.randn(N)
    contenders = {
        "eager": fn, "minicompiler": minicompiler.compile(fn, backend="cpp"), "torch.compile": torch.compile(fn),
    }
    for name, compiled in contenders.items():  # compile, warm up, and check against eager
        torch.testing.assert_close(compiled(x), fn(x), msg=f"{name} disagrees with eager")
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, compiled in contenders.items():
            samples[name] += call_times(compiled, x, calls)
    return {name: {"min_ms": min(s) * 1e3, "median_ms": statistics.median(s) * 1e3} for name, s in samples.items()}


def first_call_seconds(name: str, cache: str) -> float:
    env = {**os.environ, "MINICOMPILER_CACHE_DIR": cache}
    script = FIRST_CALL.format(here=os.path.dirname(os.path.abspath(__file__)), n=N, name=name)
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return float(result.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", help="where to write the results")
    options = parser.parse_args()
    results = {
        "python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(), "compiler": os.environ.get("CXX", "g++"),
        "date": time.strftime("%Y-%m-%d"), "workloads": {},
    }
    for name, fn in FUNCTIONS.items():
        times = steady_state(fn, options.rounds)
        with tempfile.TemporaryDirectory() as cache:
            cold, warm = first_call_seconds(name, cache), first_call_seconds(name, cache)
        row = {**times, "cold_first_call_s": cold, "warm_first_call_s": warm}
        for stat in ("min_ms", "median_ms"):
            row[f"speedup_vs_eager_{stat[:-3]}"] = times["eager"][stat] / times["minicompiler"][stat]
            row[f"vs_torch_compile_{stat[:-3]}"] = times["minicompiler"][stat] / times["torch.compile"][stat]
        results["workloads"][name] = row
        print(f"{name:14}" + "".join(f"  {k} {v['min_ms']:.2f}/{v['median_ms']:.2f} ms" for k, v in times.items())
              + f"  (min/median)  speedup {row['speedup_vs_eager_min']:.2f}x/{row['speedup_vs_eager_median']:.2f}x"
              + f"  mc/tc {row['vs_torch_compile_min']:.2f}/{row['vs_torch_compile_median']:.2f}"
              + f"  first call: cold {cold:.2f} s, warm cache {warm:.3f} s")
    if options.json:
        with open(options.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
