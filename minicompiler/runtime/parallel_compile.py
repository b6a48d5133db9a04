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

The workers are started once per process, when the first graph for a GPU begins to compile
(`start_workers`), and then wait for work: an interpreter's start, Triton's import and its first
compile's setup (~0.5 s each on the H100 machine, 16 of them at once) happen while the graph is
captured and lowered, not after, and once for all the graphs of a process (a training step has
two: the forward and the backward).

This leans on two of Triton's internals (`JITFunction.device_caches` and the `compile` it keeps);
where they differ (another Triton version), or a worker fails, kernels compile at their first
launch as before. $MINICOMPILER_COMPILE_WORKERS sets the number of workers (0: none).
"""

from __future__ import annotations

import atexit
import itertools
import os
import pickle
import queue
import subprocess
import sys
import tempfile
import threading
import time
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


def interpreting() -> bool:
    """Whether Triton runs kernels in its interpreter ($TRITON_INTERPRET): then nothing is compiled."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


class _Worker:
    """One worker process. It is given batches of requests, a line on its stdin each (batch number,
    Triton cache folder, requests file), and answers each with a line (batch number, how many
    compiled). A thread reads the answers into a queue, so that waiting for one can time out."""

    def __init__(self) -> None:
        environment = {**os.environ, "TRITON_INTERPRET": "0"}  # a worker compiles, whatever this process does
        self.process = subprocess.Popen([sys.executable, str(WORKER)], env=environment, text=True, bufsize=1,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._answers: queue.Queue[str | None] = queue.Queue()
        self._read: dict[int, int] = {}  # answers read while waiting for another batch's
        self._ended = False
        threading.Thread(target=self._read_answers, daemon=True).start()

    def _read_answers(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._answers.put(line)
        self._answers.put(None)  # the process has ended

    def alive(self) -> bool:
        return not self._ended and self.process.poll() is None

    def give(self, batch: int, requests_file: Path, cache_folder: str) -> bool:
        """Hand it a batch; False if it cannot take one (it has ended)."""
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(f"{batch}\t{cache_folder}\t{requests_file}\n")
            self.process.stdin.flush()
        except OSError:
            self._ended = True
        return not self._ended

    def compiled(self, batch: int, deadline: float) -> int | None:
        """How many of `batch`'s requests compiled; None if the worker ended or ran past `deadline`
        (it is stopped then; the next graph starts another)."""
        while batch not in self._read and not self._ended:
            try:
                line = self._answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.stop(kill=True)
            else:
                answered, count = map(int, line.split())
                self._read[answered] = count
        return self._read.pop(batch, None)

    def stop(self, kill: bool = False) -> None:
        """Close its stdin (it exits after the batch it is on), or kill it."""
        self._ended = True
        if kill:
            self.process.kill()
        elif self.process.stdin is not None:
            self.process.stdin.close()


_WORKERS: list[_Worker] = []  # this process's, started once (start_workers) and kept
_BATCHES = itertools.count()


def start_workers() -> None:
    """Start the workers that are not running yet, so that they are ready when the kernels are
    (none where Triton interprets or workers are switched off), and Triton's own setup in this
    process. The compiler calls it when a graph for a GPU begins to compile."""
    if workers_wanted() >= 2 and not interpreting():
        _running(workers_wanted())
        _set_up_triton()


_SETUP: threading.Thread | None = None  # Triton's once-per-process setup, on a thread of its own


def _set_up_triton() -> None:
    """Triton sets itself up in a process at its first kernel: it builds its CUDA helpers with the C
    compiler and hashes its own source files for its cache keys. In a model's first call on the
    H200 machine that took 0.4 s and 0.36 s, after the graph was captured and lowered (the first
    kernel's `_request`). On a thread started here it runs while the graph is captured (the
    compiler and the file reads wait without the interpreter's lock); `wait_for_triton_setup`
    waits for it before this process asks Triton anything."""
    global _SETUP
    if _SETUP is None:
        _SETUP = threading.Thread(target=_triton_setup, name="minicompiler-triton-setup", daemon=True)
        _SETUP.start()


def wait_for_triton_setup() -> None:
    if _SETUP is not None:
        _SETUP.join()


def _triton_setup() -> None:
    try:
        from triton.runtime import driver
        from triton.runtime.cache import triton_key

        driver.active.get_current_device()
        triton_key()
    except Exception:  # noqa: BLE001, S110 - another Triton, or no driver: the first kernel sets it up
        pass


def _running(count: int) -> list[_Worker]:
    """`count` running workers: those started before, and new ones for any that ended."""
    _WORKERS[:] = [worker for worker in _WORKERS if worker.alive()]
    _WORKERS.extend(_Worker() for _ in range(count - len(_WORKERS)))
    return _WORKERS[:count]


@atexit.register
def _stop_workers() -> None:
    for worker in _WORKERS:
        worker.stop()


class Compiling:
    """Workers compiling a graph's kernels; `wait()` before the first launch. Meanwhile the
    compiler goes on (a training step's backward is lowered while its forward compiles)."""

    def __init__(self, requests: list[Request], workers: int) -> None:
        self.requests, self.workers = len(requests), workers
        self._folder = tempfile.TemporaryDirectory(prefix="minicompiler-compile-")
        self._given = _give(requests, workers, Path(self._folder.name))

    def wait(self) -> int:
        """Wait for the workers; how many requests failed there (those compile at their launch)."""
        deadline = time.monotonic() + TIMEOUT_S
        failed = 0
        for worker, batch, count in self._given:
            compiled = worker.compiled(batch, deadline) if worker is not None else None
            failed += count - (compiled or 0)
        self._given = []
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
    """Compile `requests` in `workers` of the workers and wait for them; how many failed."""
    return Compiling(requests, workers).wait()


def _give(requests: list[Request], workers: int, folder: Path) -> list[tuple[_Worker | None, int, int]]:
    """Give each of `workers` workers every n-th request, as a batch of its own: (worker, batch
    number, how many requests); the worker is None where it could not take them."""
    from triton import knobs

    given: list[tuple[_Worker | None, int, int]] = []
    for index, worker in enumerate(_running(workers)):
        share, batch = requests[index::workers], next(_BATCHES)
        requests_file = folder / f"requests_{batch}.pickle"
        requests_file.write_bytes(pickle.dumps(share))
        # the cache this process reads now (the workers were started with the folder of their time)
        taken = worker.give(batch, requests_file, knobs.cache.dir)
        given.append((worker if taken else None, batch, len(share)))
    return given
