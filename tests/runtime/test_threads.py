"""Threads compiling and calling compiled functions at once, with a cold kernel cache: every
result matches eager, and each function compiles its entry once."""

from __future__ import annotations

import threading

import pytest
import torch

import minicompiler
from minicompiler.runtime import loader

THREADS = 8


@pytest.fixture
def cold_cache(tmp_path, monkeypatch):
    """A fresh on-disk cache and an empty in-process one: every kernel is built during the test."""
    monkeypatch.setenv("MINICOMPILER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(loader, "_loaded", {})


def _run_threads(work) -> list[BaseException]:
    """Run work(i) on THREADS threads started together; the exceptions they raised."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def body(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def _functions(seed: int):
    """Fresh functions (fresh kernels: the constant is in the source) so each round is cold."""
    scale = 1.0 + seed / 7

    def gelu_ish(x):
        return torch.tanh(x * scale) * x + x.sum(dim=-1, keepdim=True)

    def softmaxish(x):
        return torch.softmax(x * scale, dim=-1).mean(dim=0)

    return [gelu_ish, softmaxish]


@pytest.mark.parametrize("round_", range(3))
def test_threads_share_one_compiled_function(cold_cache, round_):
    fn = _functions(round_)[0]
    compiled = minicompiler.compile(fn, backend="cpp")
    inputs = [torch.randn(4, 33) for _ in range(THREADS)]

    def work(i: int) -> None:
        for _ in range(3):
            torch.testing.assert_close(compiled(inputs[i]), fn(inputs[i]))

    assert _run_threads(work) == []
    assert len(compiled.reports) == 1  # one compilation, not one per thread


def test_threads_compile_different_functions(cold_cache):
    functions = _functions(10) + _functions(11)
    compiled = [minicompiler.compile(fn, backend="cpp") for fn in functions]

    def work(i: int) -> None:
        for j in range(len(functions)):  # each thread calls every function, starting at a different one
            k = (i + j) % len(functions)
            x = torch.randn(3 + i % 2, 17)  # two shapes: two entries per function
            torch.testing.assert_close(compiled[k](x), functions[k](x))

    assert _run_threads(work) == []
    assert all(len(c.cache) <= 2 for c in compiled)
