"""A graph's Triton kernels compiled in several processes at once, before its first call.

Triton compiles a kernel at its first launch, in the launching process, one after another: about
0.3 s each on the H100 machine's CPU, mostly in LLVM with the GIL held (threads do not help),
and a C launcher per signature of argument types (built with gcc, ~0.4 s). A ResNet-18 training
step has 164 kernels and 21 signatures: its first step took 40 s. torch.compile compiles in a pool
of worker processes; so does this:

1. Here, each kernel is warmed up with stand-ins for its tensors (their dtypes; `MockTensor`
   pointers count as 16-byte aligned, as torch's allocations are). Triton's own code works out what
   a launch would compile (the specialization, constexprs, options) and is stopped just before
   compiling by a stand-in for its `compile`, which keeps those arguments (`_request`).
2. The requests are split among worker processes (compile_worker.py, a script run by a fresh
   interpreter: multiprocessing's spawn would import the user's `__main__` again), which compile
   them into Triton's on-disk cache.
3. The compiler goes on meanwhile (a training step's backward is lowered while its forward's
   kernels compile); the compiled module waits for its workers at its first call, where each
   kernel's first launch then finds it in that cache and only loads it.

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
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

WORKER = Path(__file__).with_name("compile_worker.py")
# the H100 machine has 16 cores; ResNet-18 b16's first training step: 16 workers 9.0 s, 8 13.2 s, none 39.6 s
MAX_WORKERS = 16
TIMEOUT_S = 900  # a worker that takes longer is stopped; its kernels compile at their launch

# compile_worker.py's request: file, module, kernel, signature, constexprs, attrs, target, options
Request = tuple[Any, ...]


def workers_wanted() -> int:
    setting = os.environ.get("MINICOMPILER_COMPILE_WORKERS")
    return int(setting) if setting else min(MAX_WORKERS, os.cpu_count() or 1)


class Compiling:
    """Worker processes compiling a graph's kernels; `wait()` before the first launch. Meanwhile
    the compiler goes on (a training step's backward is lowered while its forward compiles)."""

    def __init__(self, requests: list[Request], workers: int) -> None:
        self.requests, self.workers = len(requests), workers
        self._folder = tempfile.TemporaryDirectory(prefix="minicompiler-compile-")
        self._running = _start_workers(requests, workers, Path(self._folder.name))

    def wait(self) -> int:
        """Wait for the workers; how many requests failed there (those compile at their launch)."""
        failed = sum(_failures(process, count) for process, count in self._running)
        self._running = []
        self._folder.cleanup()
        return failed

    @property
    def note(self) -> str:
        """What the report says about it."""
        return f"precompiled: {self.requests} Triton kernels in {self.workers} worker processes"


def precompile(module: ModuleType,
               launches: list[tuple[Any, list[torch.dtype], dict[str, int]]]) -> tuple[Compiling | None, str | None]:
    """Start compiling the kernels of `module` that `launches` (jit function, its tensors' dtypes,
    its launch config) will need and this process has not compiled. Returns the workers (None when
    there is nothing for them: one kernel or none to compile, or no workers) and a note for the
    report (what they do, or why they could not be given the kernels)."""
    if workers_wanted() < 2 or len(launches) < 2:
        return None, None
    recorded = [_request(module, kernel, dtypes, config) for kernel, dtypes, config in launches]
    requests = [r for r in recorded if isinstance(r, tuple)]
    if len(requests) < 2:
        failures = [r for r in recorded if isinstance(r, str)]
        why = f"kernels compile at their first launch: {failures[0]}" if failures else None
        return None, why
    compiling = Compiling(requests, min(workers_wanted(), len(requests)))
    return compiling, compiling.note


class _Recorded(Exception):  # noqa: N818 - not an error: carries what Triton was about to compile
    pass


def _request(module: ModuleType, kernel: Any, dtypes: list[torch.dtype],
             config: dict[str, int]) -> Request | str | None:
    """What `kernel`'s launch with tensors of `dtypes` would compile; None if this process has
    already compiled it, or why it could not be worked out (Triton's internals are not those this
    reads, say)."""
    from triton.runtime import driver

    def record(src: Any, target: Any = None, options: Any = None, **_: Any) -> None:
        raise _Recorded(src.signature, src.constants, src.attrs, target, options)

    try:
        kernel.device_caches[driver.active.get_current_device()]  # makes the binder, which sets kernel.compile
        compile_now = kernel.compile
    except Exception as error:  # noqa: BLE001 - another Triton's internals, or no driver: compile at the launch
        return f"{type(error).__name__}: {error}"
    kernel.compile = record
    try:
        kernel.warmup(*dtypes, grid=(1,), **config)
    except _Recorded as recorded:
        return (module.__file__, module.__name__, kernel.__name__, *recorded.args)
    except Exception as error:  # noqa: BLE001 - nothing is lost: the launch compiles it, and raises its error
        return f"{type(error).__name__}: {error}"
    finally:
        kernel.compile = compile_now
    return None


def compile_in_workers(requests: list[Request], workers: int) -> int:
    """Compile `requests` in `workers` processes and wait for them; how many failed."""
    return Compiling(requests, workers).wait()


def _start_workers(requests: list[Request], workers: int, folder: Path) -> list[tuple[subprocess.Popen, int]]:
    """`workers` processes, each given every n-th request; with the number of requests each has."""
    from triton import knobs

    environment = {**os.environ, "TRITON_CACHE_DIR": knobs.cache.dir}  # the cache this process reads
    running = []
    for index in range(workers):
        share = requests[index::workers]
        requests_file = folder / f"requests_{index}.pickle"
        requests_file.write_bytes(pickle.dumps(share))
        process = subprocess.Popen([sys.executable, str(WORKER), str(requests_file)], env=environment,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        running.append((process, len(share)))
    return running


def _failures(process: subprocess.Popen, count: int) -> int:
    """How many of a worker's `count` requests did not compile (all, if it died or hung)."""
    try:
        out, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return count
    return count - len(out.splitlines())
