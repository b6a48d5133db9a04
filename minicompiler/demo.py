"""`make demo`: compile the seeds' workloads, print one full stage report and a timing table.

    python -m minicompiler.demo [--device cpu|cuda]
"""

from __future__ import annotations

import argparse

import torch

import minicompiler
from minicompiler.bench.timing import first_call_seconds, median_call_seconds
from minicompiler.bench.workloads import WORKLOADS, double_cosine


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m minicompiler.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    device = parser.parse_args(argv).device

    print("=" * 100)
    print("Seed 004: minicompiler.compile(lambda x: torch.cos(torch.cos(x))) — every stage")
    print("=" * 100)
    f = minicompiler.compile(double_cosine)
    f(torch.randn(1 << 22, device=device))
    print(f.report)

    print()
    print(f"{'workload':34} {'eager ms':>10} {'compiled ms':>12} {'speedup':>8} {'first call s':>13}  max |error|")
    with torch.no_grad():
        for workload in WORKLOADS:
            torch.manual_seed(0)
            fn, args = workload.make(device)
            compiled = minicompiler.compile(fn)
            first = first_call_seconds(compiled, args)
            eager_s = median_call_seconds(fn, args, repeats=5)
            compiled_s = median_call_seconds(compiled, args, repeats=5)
            error = (fn(*args).double() - compiled(*args).double()).abs().max().item()
            print(
                f"{workload.name:34} {eager_s * 1e3:10.3f} {compiled_s * 1e3:12.3f} "
                f"{eager_s / compiled_s:7.2f}x {first:13.2f}  {error:.1e}"
            )


if __name__ == "__main__":
    main()
