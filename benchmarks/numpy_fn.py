"""Seed 001's NumPy experiment: `numpy_fn` on 1024x640 float64 arrays, NumPy itself vs compiled.

    python benchmarks/numpy_fn.py [rows] [cols]

minicompiler and torch.compile both map the NumPy calls to torch ops and hand back arrays. The
seed's `np.sum(X[:, :, None] * Y[:, None, :], axis=(-2, -1))` makes NumPy build a rows x cols x
cols temporary (3.4 GB for 1024x640); a compiler fuses the product into the sum instead. Times are
medians of repeated calls after warm-up; each compiled result is checked against NumPy's first.
The first call includes compiling, with an empty on-disk kernel cache.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

import minicompiler
from minicompiler.bench.workloads import numpy_fn


def median_seconds(fn, args, repeats: int = 5) -> float:
    fn(*args)  # warm-up (and, for the compilers, compiling)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    rows, cols = (int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (1024, 640)
    os.environ["MINICOMPILER_CACHE_DIR"] = tempfile.mkdtemp()  # first calls compile from nothing
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((rows, cols)), rng.standard_normal((rows, cols))
    print(f"numpy {np.__version__}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"X, Y: float64[{rows}, {cols}]")
    expected = numpy_fn(x.copy(), y.copy())
    runs = {"NumPy": numpy_fn, "minicompiler": minicompiler.compile(numpy_fn), "torch.compile": torch.compile(numpy_fn)}
    baseline = None
    for name, fn in runs.items():
        start = time.perf_counter()
        got = fn(x.copy(), y.copy())
        first = time.perf_counter() - start
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
        seconds = median_seconds(fn, (x, y))
        baseline = baseline or seconds
        print(f"{name:14} first call {first:7.2f} s   median {seconds * 1e3:9.1f} ms   "
              f"{baseline / seconds:6.1f}x NumPy")


if __name__ == "__main__":
    main()
