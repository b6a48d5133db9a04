"""The whole-model part of `python -m minicompiler.bench`: every model of zoo.py, each task,
each compiler; a table, and optionally a profile per model.

A row is one (model, task): the sizes it ran at and, per compiler, the median seconds, the
first call's seconds (compiling included), the error against eager and whether it is within
tolerance. Rows are handed to `on_row` as they finish, so a run stopped by its deadline still
leaves everything it measured.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from minicompiler.bench.compare import bench_inference, bench_training, compilers
from minicompiler.bench.profiling import format_profile, profile_calls
from minicompiler.bench.zoo import CASES, ModelCase, Skip

PROFILED = ("eager", "torch.compile default", "minicompiler default")  # the compilers --profile looks at


def run_models(device: str, modes: list[str], tasks: list[str], only: list[str] | None, quick: bool, repeats: int,
               vs_torch: bool, profile: bool, deadline: float, on_row: Callable[[dict[str, Any]], None]) -> None:
    chosen = compilers(modes, vs_torch)
    # Profiled once every row is timed: after a profiler session the CUDA calls of a first call
    # (loading kernels, capturing graphs) ran slower, which the next model's first call measured
    to_profile: list[tuple[dict[str, Any], str, dict]] = []
    for case in CASES:
        if only and not any(matches(case.name, pattern) for pattern in only):
            continue
        if time.perf_counter() > deadline:
            on_row({"model": case.name, "family": case.family, "skipped": "deadline reached before it started"})
            continue
        for task in tasks:
            row, runnable = _run_case(case, task, device, quick, repeats, chosen)
            on_row(row)
            if profile and runnable:
                to_profile.append((row, task, runnable))
    for row, task, runnable in to_profile:
        with torch.no_grad() if task == "inference" else contextlib.nullcontext():
            row["profile"] = {n: profile_calls(*runnable[n]) for n in PROFILED if n in runnable}


def matches(name: str, pattern: str) -> bool:
    """--only: a part of the name, or with a final `$` the whole name ("ResNet-18 b1$" is not b16)."""
    return name == pattern[:-1] if pattern.endswith("$") else pattern in name


def _run_case(case: ModelCase, task: str, device: str, quick: bool, repeats: int,
              chosen: dict) -> tuple[dict[str, Any], dict]:
    """One (model, task) row, and each compiler's runnable call (for the profile)."""
    row: dict[str, Any] = {"model": case.name, "family": case.family, "task": task}
    print(f"  {case.name} ({task})...", file=sys.stderr, flush=True)
    torch.manual_seed(0)
    try:
        built = case.make(device, quick)
    except Skip as reason:
        row["skipped"] = str(reason)
        print(f"  skipped {case.name}: {reason}", file=sys.stderr)
        return row, {}
    row["sizes"] = built.sizes
    bench = bench_inference if task == "inference" else bench_training
    try:
        row["results"], runnable = bench(built, chosen, repeats)
    except Exception as failure:  # noqa: BLE001 - each compiler's failure is caught inside: this is eager's
        row["skipped"] = f"eager failed: {type(failure).__name__}: {str(failure)[:160]}"
        print(f"  skipped {case.name}: {row['skipped']}", file=sys.stderr)
        return row, {}
    return row, runnable


def format_rows(rows: list[dict[str, Any]]) -> str:
    """The table: ms per call (and, beside each compiler, its speedup over eager and first call s)."""
    names = list(dict.fromkeys(c for r in rows for c in r.get("results", {})))
    header = f"{'model':38} {'task':9} " + " ".join(f"{n[:30]:>30}" for n in names)
    lines = [header, "-" * len(header)]
    for row in rows:
        if "skipped" in row:
            lines.append(f"{row['model']:38} {row.get('task', ''):9} skipped: {row['skipped']}")
            continue
        cells = [_cell(row["results"].get(n), row["results"].get("eager")) for n in names]
        lines.append(f"{row['model']:38} {row['task']:9} " + " ".join(f"{c:>30}" for c in cells))
    lines.append("cells: ms per call [speedup over eager] (first call s); WRONG: result differs from eager; "
                 "ERR: failed (see JSON)")
    return "\n".join(lines)


def _cell(result: dict[str, Any] | None, eager: dict[str, Any] | None) -> str:
    if result is None:
        return "-"
    if "error" in result:
        return "ERR"
    if "s" not in result:
        return "?"
    speedup = f" {eager['s'] / result['s']:.2f}x" if eager and "s" in eager else ""
    wrong = " WRONG" if not result.get("correct", True) else ""
    return f"{result['s'] * 1e3:.3f}{speedup} ({result['first_call_s']:.1f}s){wrong}"


def format_profiles(rows: list[dict[str, Any]]) -> str:
    return "\n".join(format_profile(f"{r['model']} ({r['task']})", r["profile"]) for r in rows if r.get("profile"))
