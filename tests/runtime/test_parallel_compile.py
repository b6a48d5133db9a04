"""Parallel Triton compilation (runtime/parallel_compile.py): worker processes compile kernels into
Triton's on-disk cache, where this process's own compile (a kernel's first launch) finds them.

The worker tests compile for an H100 target (sm_90) on any machine: Triton's compiler and ptxas
need no GPU. The end-to-end test needs a GPU and compiled Triton (the lent H100)."""

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

triton = pytest.importorskip("triton")

import minicompiler  # noqa: E402
from minicompiler.runtime import loader, parallel_compile  # noqa: E402

KERNELS = """
import triton
import triton.language as tl


@triton.jit
def kernel_sin(in_x, out_y, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_y + i, tl.sin(tl.load(in_x + i)))


@triton.jit
def kernel_exp(in_x, out_y, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_y + i, tl.exp(tl.load(in_x + i)))
"""
SIGNATURE = {"in_x": "*fp32", "out_y": "*fp32", "BLOCK": "constexpr"}


@pytest.fixture
def compiled_triton(tmp_path, monkeypatch):
    """Triton compiling (not interpreting) into a cache of this test's own; the kernels module."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("MINICOMPILER_CACHE_DIR", str(tmp_path / "minicompiler"))
    return loader.load_python_module(KERNELS + f"\n# {tmp_path}\n")  # a module of this test's own


def request(module, name, block=64):
    from triton.backends.compiler import GPUTarget

    return (module.__file__, module.__name__, name, SIGNATURE, {(2,): block}, {},
            GPUTarget("cuda", 90, 32), {"num_warps": 2})


# Compiles one request in a fresh interpreter, as a kernel's first launch would, and prints whether
# Triton found it in its cache. (This process imported Triton under TRITON_INTERPRET=1: its
# standard library is interpreted and cannot be compiled.)
COMPILE_HERE = """
import pickle, sys
import triton
from triton import knobs
from triton.compiler import ASTSource
sys.path.insert(0, {runtime!r})
from compile_worker import kernels_module

file, module_name, name, signature, constexprs, attrs, target, options = pickle.load(open(sys.argv[1], "rb"))
hits = []
knobs.compilation.listener = lambda **event: hits.append(event["cache_hit"])
kernel = getattr(kernels_module(file, module_name, {{}}), name)
triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=target, options=options)
print(hits)
"""


def found_in_cache(req, tmp_path) -> bool:
    """Whether compiling `req` afresh finds it in Triton's cache (where a worker put it)."""
    request_file = tmp_path / "request.pickle"
    request_file.write_bytes(pickle.dumps(req))
    script = COMPILE_HERE.format(runtime=str(Path(parallel_compile.__file__).parent))
    done = subprocess.run([sys.executable, "-c", script, str(request_file)], capture_output=True, text=True,
                          check=True)
    return done.stdout.strip() == "[True]"


def test_workers_compile_into_the_cache_this_process_reads(compiled_triton, tmp_path):
    requests = [request(compiled_triton, "kernel_sin"), request(compiled_triton, "kernel_exp"),
                request(compiled_triton, "kernel_sin", block=128)]
    assert parallel_compile.compile_in_workers(requests, workers=2) == 0
    assert all(found_in_cache(r, tmp_path) for r in requests)
    assert not found_in_cache(request(compiled_triton, "kernel_exp", block=256), tmp_path)  # the check can fail


def test_a_request_that_fails_is_counted_and_the_others_still_compile(compiled_triton, tmp_path):
    good, bad = request(compiled_triton, "kernel_sin"), request(compiled_triton, "kernel_nowhere")
    assert parallel_compile.compile_in_workers([good, bad], workers=1) == 1
    assert found_in_cache(good, tmp_path)


def test_no_workers_when_switched_off(monkeypatch):
    monkeypatch.setenv("MINICOMPILER_COMPILE_WORKERS", "0")
    assert parallel_compile.precompile(None, [(None, [], {})] * 5) == (None, None)


def test_tritons_setup_runs_once_on_a_thread_and_is_waited_for(monkeypatch):
    """Started with the workers, Triton's per-process setup runs once, on a thread of its own (on a
    machine without a GPU it finds no driver and leaves the setup to the first kernel, quietly),
    and codegen waits for it before it makes a kernel's launcher."""
    monkeypatch.setattr(parallel_compile, "_SETUP", None)
    parallel_compile._set_up_triton()
    thread = parallel_compile._SETUP
    parallel_compile._set_up_triton()
    assert parallel_compile._SETUP is thread and thread.daemon
    parallel_compile.wait_for_triton_setup()
    assert not thread.is_alive()


def matmul_and_reductions(x, y):
    return (x.sin() @ y).relu().sum(0) + y.cos().mean(1)


def twins_of_two_sizes(x, y):
    # one kernel's code twice (a block covers each tensor: no mask), launched with two block sizes
    return x.sin() * 2, y.sin() * 2


@pytest.mark.parametrize("f, shapes", [(matmul_and_reductions, [(64, 48), (48, 48)]),
                                       (twins_of_two_sizes, [(256,), (128,)])])
def test_a_compiled_graph_launches_kernels_the_workers_compiled(f, shapes, tmp_path, monkeypatch):
    # asked when the test runs, not at collection (the GPU plugin turns the interpreter off then)
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a CUDA GPU and compiled (not interpreted) Triton")
    from triton import knobs

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("MINICOMPILER_COMPILE_WORKERS", "2")
    x, y = (torch.randn(shape, device="cuda") for shape in shapes)
    compiled = minicompiler.compile(f)
    hits, launchers_built = [], []
    knobs.compilation.listener = lambda **event: hits.append(event["cache_hit"])
    build = sys.modules["triton.runtime.build"]
    if hasattr(build, "_build"):  # Triton 3.6 builds each launcher's C module with it (3.9 differs)
        monkeypatch.setattr(build, "_build", lambda *args, _build=build._build: launchers_built.append(args[0])
                            or _build(*args))
    try:
        torch.testing.assert_close(compiled(x, y), f(x, y))
    finally:
        knobs.compilation.listener = None
    notes = " ".join(n for g in compiled.report.graphs for s in g.stages if s.name == "codegen" for n in s.notes)
    precompiled = re.search(r"precompiled: (\d+) Triton kernels in 2 worker processes", notes)
    assert precompiled, notes
    # every kernel's first launch found it compiled: as many compiles here as kernels there, all hits
    assert len(hits) == int(precompiled[1]) >= 2 and all(hits), (hits, notes)
    assert "__triton_launcher" not in launchers_built  # and its launcher built


def test_workers_are_started_once_and_compile_into_the_cache_of_each_batch(compiled_triton, tmp_path, monkeypatch):
    first = request(compiled_triton, "kernel_sin")
    assert parallel_compile.compile_in_workers([first], workers=2) == 0
    pids = [w.process.pid for w in parallel_compile._running(2)]
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "another"))  # the workers started with the first one
    second = request(compiled_triton, "kernel_exp")
    assert parallel_compile.compile_in_workers([second], workers=2) == 0
    assert [w.process.pid for w in parallel_compile._running(2)] == pids
    assert found_in_cache(second, tmp_path)  # in the cache the process reads now (found_in_cache reads the env)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    assert found_in_cache(first, tmp_path) and not found_in_cache(second, tmp_path)


def test_a_worker_that_ended_counts_its_requests_failed_and_is_replaced(compiled_triton, tmp_path):
    requests = [request(compiled_triton, "kernel_sin"), request(compiled_triton, "kernel_exp")]
    worker = parallel_compile._running(1)[0]
    worker.process.kill()
    worker.process.wait()
    compiling = parallel_compile.Compiling(requests, workers=1)  # given to a new worker
    assert compiling.wait() == 0 and found_in_cache(requests[1], tmp_path)
    dying = parallel_compile._running(1)[0]
    assert dying is not worker
    compiling = parallel_compile.Compiling([request(compiled_triton, "kernel_sin", block=32)], workers=1)
    dying.process.kill()  # before it answers: its requests failed (their kernels compile at launch)
    assert compiling.wait() == 1


def test_no_workers_start_where_triton_interprets(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    before = list(parallel_compile._WORKERS)
    parallel_compile.start_workers()
    assert parallel_compile._WORKERS == before
