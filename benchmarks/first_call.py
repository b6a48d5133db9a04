"""A model's first call (compiling included) in a fresh process with empty kernel caches.

    python benchmarks/first_call.py MODEL TASK [COMPILER] [--profile]     (once per line you want)

MODEL is a name from minicompiler/bench/zoo.py ("ResNet-18 b16", "MiniTransformer (seed 003)", ...),
TASK `inference` or `training` (one step of minicompiler.bench.compare), COMPILER `minicompiler`
(the default) or `torch.compile`. Prints the first call's seconds, the second call's, and
minicompiler's notes on compiling in worker processes. $MINICOMPILER_COMPILE_WORKERS=0 measures
Triton compiling each kernel at its first launch instead. `--profile` adds cProfile's view of the
first call (cumulative time: which stage, or which wait, the seconds go to) and, for minicompiler,
the time of each stage the report records and the Triton kernels this process compiled itself (at
their first launch: the workers had not compiled them), with their specialization.

In `python -m minicompiler.bench` the compilers share a process: there, minicompiler's first calls
after torch.compile's measured 2-3x longer (Inductor leaves a compile worker busy, which takes a core
from minicompiler's workers). Here each first call has the machine to itself.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import tempfile
import time

for variable in ("TRITON_CACHE_DIR", "MINICOMPILER_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
    os.environ[variable] = tempfile.mkdtemp(prefix="first-call-")

import torch  # noqa: E402 - after the cache directories are chosen

import minicompiler  # noqa: E402
from minicompiler.bench.compare import _Step  # noqa: E402
from minicompiler.bench.zoo import CASES, quiet_randomness  # noqa: E402


def main(model: str, task: str, compiler: str = "minicompiler", profile: bool = False) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    built = next(c for c in CASES if c.name == model).make(device, device == "cpu")
    module = quiet_randomness(built.module)
    compile_ = torch.compile if compiler == "torch.compile" else minicompiler.compile
    if task == "training":
        step = _Step(module, compile_, built.inputs)
        compiled, run = step.model, step
    else:
        compiled = compile_(module.eval())

        def run() -> None:
            with torch.no_grad():
                compiled(*built.inputs)

    compiled_here = _listen_to_triton() if profile and device == "cuda" else []
    seconds = []
    profiler = cProfile.Profile()
    for call in range(2):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        if profile and call == 0:
            profiler.enable()
        run()
        if device == "cuda":
            torch.cuda.synchronize()
        profiler.disable()
        seconds.append(time.perf_counter() - start)
    notes = [n for r in getattr(compiled, "reports", []) for g in r.graphs for s in g.stages for n in s.notes
             if n.startswith("precompiled") or "first launch" in n]
    print(f"{model:28} {task:9} {compiler:13} first {seconds[0]:7.2f} s  second {seconds[1] * 1e3:8.2f} ms  {notes}")
    if profile:
        for stage in (s for r in getattr(compiled, "reports", []) for g in r.graphs for s in g.stages):
            print(f"  stage {stage.name:28} {stage.seconds:7.3f} s")
        for name, attrs in compiled_here:
            print(f"  compiled in this process at its first launch: {name} {attrs}")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(40)


def _listen_to_triton() -> list[tuple[str, str]]:
    """The kernels Triton compiles in this process from now on (not found in its cache)."""
    from triton import knobs

    compiled: list[tuple[str, str]] = []

    def listener(src: object, cache_hit: bool, **_: object) -> None:
        if not cache_hit:
            compiled.append((getattr(src, "name", "?"), repr(getattr(src, "attrs", ""))[:200]))

    knobs.compilation.listener = listener
    return compiled


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--profile"]
    main(*arguments, profile="--profile" in sys.argv)
