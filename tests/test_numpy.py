"""NumPy functions compile: arrays become tensors, NumPy calls become torch ops, arrays come back.
Every result is compared with NumPy itself on fresh random arrays."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import minicompiler
from minicompiler.bench.workloads import numpy_fn


def check_like_numpy(fn: Callable[..., object], *make_args: Callable[[], np.ndarray], calls: int = 2) -> object:
    compiled = minicompiler.compile(fn)
    for _ in range(calls):
        args = [make() for make in make_args]
        expected = fn(*[a.copy() for a in args])
        got = compiled(*args)
        for g, e in zip(*(v if isinstance(v, tuple) else (v,) for v in (got, expected)), strict=True):
            assert isinstance(g, np.ndarray) and g.dtype == e.dtype and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-9)
    assert compiled.report.eager_fallback is None and not compiled.report.graph_breaks
    return compiled


def test_seed_001_numpy_fn() -> None:
    rng = np.random.default_rng(0)

    def with_a_constant_column() -> np.ndarray:
        x = rng.standard_normal((48, 20))
        x[:, 3] = 0.0  # a zero standard deviation: the masked assignment matters
        return x

    compiled = check_like_numpy(numpy_fn, with_a_constant_column, lambda: rng.standard_normal((48, 20)))
    assert len(compiled.reports) == 1
    # the normalized X and Y, and their squares, are computed where the row sums read them: no
    # (48, 20) buffer is written, only X and Y are read
    buffers = compiled.report.graphs[0].stage("fuse").text.split("buffers:")[1].split("decisions:")[0]
    assert [line for line in buffers.splitlines() if "[48, 20]" in line and " input" not in line] == [], buffers


@pytest.mark.parametrize("fn", [
    lambda x, y: np.sin(x) + np.cos(y),
    lambda x, y: np.exp(x) * y - x / (np.abs(y) + 1),
    lambda x, y: (np.sum(x, axis=1), np.mean(y), x.sum(), y.mean(axis=0, keepdims=True)),
    lambda x, y: np.maximum(x, 0) + np.maximum(x, y),
    lambda x, y: np.where(x > y, x, 2.0 * y),
    lambda x, y: x @ y.T,
    lambda x, y: (x.std(axis=1), np.var(y, axis=0, ddof=1), x.max(axis=0)),
], ids=["sin_cos", "arithmetic", "reductions", "maximum", "where", "matmul", "spread"])
def test_numpy_calls_map_to_torch(fn: Callable[..., object]) -> None:
    rng = np.random.default_rng(1)
    check_like_numpy(fn, lambda: rng.standard_normal((6, 5)), lambda: rng.standard_normal((6, 5)))


def test_float32_arrays_stay_float32() -> None:
    rng = np.random.default_rng(2)
    check_like_numpy(lambda x: np.exp(x) * 0.5, lambda: rng.standard_normal(7).astype(np.float32))


def test_changing_an_array_argument_in_place() -> None:
    def fn(x):
        x += 1
        x[x > 1.5] = 0
        return x * 2

    rng = np.random.default_rng(3)
    compiled = minicompiler.compile(fn)
    for _ in range(2):
        x = rng.standard_normal(9)
        x_numpy = x.copy()
        np.testing.assert_allclose(compiled(x), fn(x_numpy))
        np.testing.assert_array_equal(x, x_numpy)
