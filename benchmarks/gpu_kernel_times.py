"""Where does a model's GPU time go, kernel by kernel, in eager, torch.compile and minicompiler?

    python benchmarks/gpu_kernel_times.py MODEL [MODEL ...] [--training] [--compiler NAME ...] [--all]

(--compiler: eager, torch.compile, minicompiler, torch.compile-reduce-overhead or
minicompiler-reduce-overhead; without it, the first three. --all: every kernel, not the 12 slowest.)

MODEL is a name from minicompiler/bench/zoo.py ("timm resnet50", ...). For each compiler: the
median call time (as minicompiler.bench times it: back to back, synchronized), the GPU's busy time
per call (the sum of its kernels' times from torch.profiler), and the kernels that take most of it,
grouped by kind (cuDNN convolutions, cuBLAS matmuls, Triton kernels, torch's own). A GPU-bound model is faster compiled
only where its kernels are: this is the table that says which ones are not.
"""

from __future__ import annotations

import collections
import re
import sys

import torch

import minicompiler
from minicompiler.bench.compare import _Step
from minicompiler.bench.timing import median_call_seconds
from minicompiler.bench.zoo import CASES, quiet_randomness

STEPS = 10
KINDS = [  # (kind, a pattern of the kernel's name); the first that matches names the kind
    ("triton", r"^triton_|^kernel_"),
    ("convolution (cuDNN)", r"cudnn|conv|implicit_gemm|sm90_xmma|xmma_fprop|dgrad|wgrad|nhwc|nchw"),
    ("matmul (cuBLAS)", r"gemm|cublas|cutlass|sm90_"),
    ("copy / layout", r"copy|Copy|transpose|elementwise_kernel.*direct_copy"),
]


def _compilers() -> dict:
    return {
        "eager": lambda m: m,
        "torch.compile": torch.compile,
        "minicompiler": minicompiler.compile,
        "torch.compile-reduce-overhead": lambda m: torch.compile(m, mode="reduce-overhead"),
        "minicompiler-reduce-overhead": lambda m: minicompiler.compile(m, mode="reduce-overhead"),
    }


def _kind(name: str) -> str:
    return next((kind for kind, pattern in KINDS if re.search(pattern, name)), "other (torch)")


def profile(model: str, which: str, training: bool, shown: int = 12) -> None:
    torch.manual_seed(0)
    built = next(c for c in CASES if c.name == model).make("cuda", False)
    module = quiet_randomness(built.module)
    if training:
        call = _Step(module, _compilers()[which], built.inputs)
    else:
        module.eval()
        compiled = _compilers()[which](module)

        def call() -> None:
            with torch.no_grad():
                compiled(*built.inputs)
    # the inputs are passed only so that the timing synchronizes on their device
    seconds = median_call_seconds(lambda *_: call(), built.inputs, repeats=30, warmup=5)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            call()
        torch.cuda.synchronize()
    per_kernel: dict[str, list[float]] = collections.defaultdict(list)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            per_kernel[event.name].append(event.device_time / STEPS)
    busy = sum(sum(v) for v in per_kernel.values())
    print(f"== {model} {'training' if training else 'inference'}, {which}: {seconds * 1e3:.3f} ms "
          f"per call, GPU busy {busy / 1e3:.3f} ms per call")
    by_kind: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    for name, times_ in per_kernel.items():
        entry = by_kind[_kind(name)]
        entry[0] += sum(times_)
        entry[1] += len(times_) / STEPS
    for kind, (total, count) in sorted(by_kind.items(), key=lambda kv: -kv[1][0]):
        print(f"   {kind:22s} {total / 1e3:8.3f} ms  {count:6.0f} kernels per call")
    print("   slowest kernels (ms per call, launches per call):")
    for name, times_ in sorted(per_kernel.items(), key=lambda kv: -sum(kv[1]))[:shown]:
        print(f"     {sum(times_) / 1e3:7.3f}  x{len(times_) / STEPS:4.0f}  {name[:110]}")


def main() -> None:
    args = sys.argv[1:]
    training = "--training" in args
    shown = 10_000 if "--all" in args else 12
    args = [a for a in args if a != "--all"]
    chosen = [args[i + 1] for i, a in enumerate(args) if a == "--compiler"] or list(_compilers())[:3]
    models = [a for i, a in enumerate(args) if a != "--training" and a != "--compiler"
              and (i == 0 or args[i - 1] != "--compiler")]
    for model in models:
        for which in chosen:
            try:
                profile(model, which, training, shown)
            except Exception as error:  # one compiler failing should not hide the others' tables
                print(f"== {model}, {which}: failed: {type(error).__name__}: {error}")


if __name__ == "__main__":
    main()
