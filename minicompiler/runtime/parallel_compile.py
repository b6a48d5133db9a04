"""A graph's Triton kernels compiled in several processes at once, before its first call.

Triton compiles a kernel at its first launch, in the launching process, one after another: about
0.3 s each on the H100 machine's CPU, mostly in LLVM with the GIL held (threads do not help). A
ResNet-18 training step has ~100 kernels, so its first step took half a minute. torch.compile
compiles in a pool of worker processes; so does this:

1. Here, each kernel is warmed up with stand-ins for its tensors (their dtypes; `MockTensor`
   pointers count as 16-byte aligned, as torch's allocations are). Triton's own code works out what
   a launch would compile (the specialization, constexprs, options) and is stopped just before
   compiling by a stand-in for its `compile`, which keeps those arguments (`_request`).
2. The requests are split among worker processes (compile_worker.py, a script run by a fresh
   interpreter: multiprocessing's spawn would import the user's `__main__` again), which compile
   them into Triton's on-disk cache.
3. Each kernel's first launch then finds it in that cache and only loads it.

This leans on two of Triton's internals (`JITFunction.device_caches` and the `compile` it keeps);
where they differ (another Triton version), or a worker fails, kernels compile at their first
launch as before. $MINICOMPILER_COMPILE_WORKERS sets the number of workers (0: none).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

WORKER = Path(__file__).with_name("compile_worker.py")
MAX_WORKERS = 16  # the H100 machine has 16 cores; ResNet-18's first step: 8 workers 13.2 s, none 39.6 s
TIMEOUT_S = 900  # a worker that takes longer is stopped; its kernels compile at their launch

# compile_worker.py's request: file, module, kernel, signature, constexprs, attrs, target, options
Request = tuple[Any, ...]


def workers_wanted() -> int:
    setting = os.environ.get("MINICOMPILER_COMPILE_WORKERS")
    return int(setting) if setting else min(MAX_WORKERS, os.cpu_count() or 1)


def precompile(module: ModuleType, launches: list[tuple[Any, list[torch.dtype], dict[str, int]]]) -> str | None:
    """Compile the kernels of `module` that `launches` (jit function, its tensors' dtypes, its
    launch config) will need and this process has not compiled. Returns a note for the report,
    or None when nothing was done here (one kernel or none to compile, or no workers)."""
    if workers_wanted() < 2 or len(launches) < 2:
        return None
    start = time.perf_counter()
    requests = [r for kernel, dtypes, config in launches if (r := _request(module, kernel, dtypes, config))]
    if len(requests) < 2:
        return None
    workers = min(workers_wanted(), len(requests))
    failed = compile_in_workers(requests, workers)
    failures = f"; {failed} of them failed there and compile at their launch" if failed else ""
    return (f"precompiled: {len(requests)} Triton kernels in {workers} worker processes "
            f"({time.perf_counter() - start:.1f} s){failures}")


class _Recorded(Exception):  # noqa: N818 - not an error: carries what Triton was about to compile
    pass


def _request(module: ModuleType, kernel: Any, dtypes: list[torch.dtype], config: dict[str, int]) -> Request | None:
    """What `kernel`'s launch with tensors of `dtypes` would compile; None if this process has
    already compiled it (or Triton's internals are not those this reads)."""
    from triton.runtime import driver

    def record(src: Any, target: Any = None, options: Any = None, **_: Any) -> None:
        raise _Recorded(src.signature, src.constants, src.attrs, target, options)

    try:
        kernel.device_caches[driver.active.get_current_device()]  # makes the binder, which sets kernel.compile
        compile_now = kernel.compile
    except Exception:  # noqa: BLE001 - another Triton's internals, or no driver: compile at the launch
        return None
    kernel.compile = record
    try:
        kernel.warmup(*dtypes, grid=(1,), **config)
    except _Recorded as recorded:
        return (module.__file__, module.__name__, kernel.__name__, *recorded.args)
    except Exception:  # noqa: BLE001 - nothing is lost: the launch compiles it, and raises its error
        return None
    finally:
        kernel.compile = compile_now
    return None


def compile_in_workers(requests: list[Request], workers: int) -> int:
    """Compile `requests` in `workers` processes, each given every n-th; how many failed."""
    from triton import knobs

    environment = {**os.environ, "TRITON_CACHE_DIR": knobs.cache.dir}  # the cache this process reads
    with tempfile.TemporaryDirectory(prefix="minicompiler-compile-") as folder:
        running = []
        for index in range(workers):
            share = requests[index::workers]
            requests_file = Path(folder) / f"requests_{index}.pickle"
            requests_file.write_bytes(pickle.dumps(share))
            process = subprocess.Popen([sys.executable, str(WORKER), str(requests_file)], env=environment,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            running.append((process, len(share)))
        return sum(_failures(process, count) for process, count in running)


def _failures(process: subprocess.Popen, count: int) -> int:
    """How many of a worker's `count` requests did not compile (all, if it died or hung)."""
    try:
        out, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return count
    return count - len(out.splitlines())
