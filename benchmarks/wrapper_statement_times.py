"""Host time per statement of the wrappers minicompiler generates, for one model's training step.

    python benchmarks/wrapper_statement_times.py "ResNet-18 b16"      (a name from minicompiler/bench/zoo.py)
    python benchmarks/wrapper_statement_times.py "timm resnet50" --inference     (eval, no_grad calls)

A profiler adds its own cost to every call it records, which in a step of ~1,000 small calls is most
of what it measures. Instead, each top-level statement of every generated `call` function gets a
`perf_counter()` reading before it (an extra ~0.1 us), and a statement's time is the gap to the next
reading. After 4 warm-up steps, 10 steps are timed, and the statements are grouped by kind: Triton
launches, allocations, convolution calls, copies, ... Host time only: nothing is synchronized
inside a step, so a statement that waits for the GPU (a full launch queue) shows that wait too.
Sizes are the full ones on CUDA, `--quick` ones on the CPU. Results: benchmarks/results/h100_2026-11-27g/.
"""

from __future__ import annotations

import collections
import re
import sys
import time
from typing import Any

import torch

import minicompiler.codegen.module as codegen_module
from minicompiler.bench.compare import _Step, compilers
from minicompiler.bench.zoo import CASES, quiet_randomness

WRAPPERS: list[dict[str, Any]] = []  # per generated wrapper: its readings and its statements
_compile_wrapper = codegen_module._compile_wrapper


def _timed_wrapper(text: str, namespace: dict[str, Any]) -> Any:
    """The wrapper with a reading before each top-level statement of `call` (one-line statements:
    a line continuing the one before it is left alone)."""
    lines, statements, readings = [], [], []
    in_call, last_code = False, ""
    for line in text.split("\n"):
        if line.startswith("def call("):
            in_call = True
        elif in_call and line and not line.startswith(" "):
            in_call = False
        elif in_call and re.match(r"^    [^ #]", line) and not last_code.rstrip().endswith((",", "(", "\\")):
            lines.append(f"    _readings.append(({len(statements)}, _now()))")
            statements.append(line.strip())
        lines.append(line)
        if line.strip() and not line.strip().startswith("#"):
            last_code = line
    WRAPPERS.append({"readings": readings, "statements": statements, "namespace": namespace})
    namespace.update(_readings=readings, _now=time.perf_counter)
    return _compile_wrapper("\n".join(lines), namespace)


def kind(statement: str, namespace: dict[str, Any]) -> str:
    if re.search(r"kernel\w*\[", statement):
        return "triton launch"
    for marker, name in (("torch.empty_strided", "alloc"), ("empty_strided_cuda", "alloc"),
                         ("convolution_grads", "convolution_grads"), ("channels_last_copy", "channels_last_copy"),
                         ("reinterpret_tensor", "reinterpret")):
        if marker in statement:
            return name
    if statement.startswith(("del ", "return")):
        return statement.split()[0]
    if found := re.search(r"= (ops\.\w+|const_\d+)", statement):
        if found.group(1).startswith("const_"):  # a torch function the wrapper holds: say which
            return f"torch call: {getattr(namespace.get(found.group(1)), '__name__', '?')}"
        return found.group(1)
    return "contiguous" if ".contiguous(" in statement else "other"


def report(wrapper: dict[str, Any], index: int) -> None:
    readings, statements, namespace = wrapper["readings"], wrapper["statements"], wrapper["namespace"]
    calls = sum(1 for position, _ in readings if position == 0)
    if not calls:
        return
    per_statement: collections.Counter[int] = collections.Counter()
    per_kind: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for (position, start), (following, end) in zip(readings, readings[1:], strict=False):
        if following != 0:  # the next call's first reading is no end of this statement
            per_statement[position] += end - start
            per_kind[kind(statements[position], namespace)] += end - start
            count[kind(statements[position], namespace)] += 1
    print(f"\n== wrapper {index}: {len(statements)} statements, {calls} calls, "
          f"{sum(per_kind.values()) / calls * 1e3:.3f} ms per call (to its return)")
    for name, seconds in per_kind.most_common():
        print(f"  {seconds / calls * 1e3:8.3f} ms  x{count[name] / calls:6.1f}  "
              f"{seconds / count[name] * 1e6:6.1f} us each  {name}")
    print("  -- slowest statements (us per call)")
    for position, seconds in per_statement.most_common(12):
        print(f"  {seconds / calls * 1e6:8.1f}  {statements[position][:150]}")


def main(model: str, inference: bool) -> None:
    codegen_module._compile_wrapper = _timed_wrapper
    device = "cuda" if torch.cuda.is_available() else "cpu"
    built = next(case for case in CASES if case.name == model).make(device, device == "cpu")
    compile_default = compilers(["default"], torch_compile=False)["minicompiler default"]
    if inference:
        compiled = compile_default(quiet_randomness(built.module).eval())

        def step() -> None:
            with torch.no_grad():
                compiled(*built.inputs)
    else:
        step = _Step(quiet_randomness(built.module), compile_default, built.inputs)
    sync = torch.cuda.synchronize if device == "cuda" else lambda: None
    for _ in range(4):
        step()
    sync()
    for wrapper in WRAPPERS:
        wrapper["readings"].clear()
    start = time.perf_counter()
    for _ in range(10):
        step()
    sync()
    task = "call (inference)" if inference else "training step"
    print(f"{model}: {(time.perf_counter() - start) / 10 * 1e3:.2f} ms per {task} (with the readings)")
    for index, wrapper in enumerate(WRAPPERS):
        report(wrapper, index)


if __name__ == "__main__":
    main(sys.argv[1], "--inference" in sys.argv[2:])
