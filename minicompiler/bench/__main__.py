"""Benchmark: eager vs minicompiler vs torch.compile, on the seeds' kernels and on whole models.

    python -m minicompiler.bench [--device cpu|cuda] [--quick] [--only NAME] [--modes default,...]
                                 [--tasks inference,training] [--profile] [--json PATH] [--html PATH]
                                 [--no-kernels] [--no-models] [--deadline-s S] [--repeats N]

Two parts. Kernels: the seeds' pointwise/reduction workloads (workloads.py), eager vs
minicompiler vs torch.compile default. Models (zoo.py, suite.py): MLP, MiniTransformer with
and without a mask, ResNet-18 at batch 1 and 16, a BERT-base encoder, seed 003's CNN, and
timm/torchvision families when importable; inference and a training step; eager and each
mode of torch.compile and of minicompiler; every result checked against eager.
Each time is a median of timed batches after warm-up, synchronized on CUDA; the compilers of
one model are timed in turn, round by round. First calls are timed whole, minicompiler's with a
cold on-disk kernel cache. `--profile` adds, per model, where one call's time goes (profiling.py).
Prints tables; writes JSON (device, versions, sizes, date) and a plotly HTML page.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from minicompiler.bench.chart import write_html
from minicompiler.bench.suite import format_profiles, format_rows, run_models
from minicompiler.bench.timing import device_seconds, first_call_seconds, median_call_seconds
from minicompiler.bench.workloads import WORKLOADS, Workload


def environment(device: str) -> dict[str, Any]:
    info = {
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
        "cpu_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }
    if device == "cpu":  # on a shared machine, how busy it was: times scale with it
        info["load_average_1min"] = round(os.getloadavg()[0], 2)
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    return info


def cold_caches() -> None:
    """Empty on-disk kernel caches for this process, so first calls include building every kernel
    (both compilers; minicompiler's Triton kernels and their launchers live in Triton's own)."""
    os.environ["MINICOMPILER_CACHE_DIR"] = tempfile.mkdtemp(prefix="minicompiler-bench-")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-bench-"))
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-bench-"))


def bench_workload(workload: Workload, device: str, repeats: int, vs_torch: bool) -> dict[str, Any]:
    import minicompiler

    torch.manual_seed(0)
    fn, args = workload.make(device)
    row: dict[str, Any] = {"workload": workload.name, "seed": workload.seed}
    with torch.no_grad():
        row["eager_s"] = median_call_seconds(fn, args, repeats)
        compiled = minicompiler.compile(fn)
        row["mc_first_call_s"] = first_call_seconds(compiled, args)
        row["mc_s"] = median_call_seconds(compiled, args, repeats)
        expected, got = fn(*args), compiled(*args)
        row["mc_max_abs_err"] = float((expected.double() - got.double()).abs().max())
        report = compiled.report
        row["mc_kernels"] = sum(len(g.kernels) for g in report.graphs) if report else 0
        row["mc_fallback"] = report.eager_fallback if report else None
        if vs_torch:
            torch._dynamo.reset()
            tc = torch.compile(fn)
            row["tc_first_call_s"] = first_call_seconds(tc, args)
            row["tc_s"] = median_call_seconds(tc, args, repeats)
    row["speedup_vs_eager"] = row["eager_s"] / row["mc_s"]
    if vs_torch:
        row["mc_vs_torch_compile"] = row["mc_s"] / row["tc_s"]
    if workload.name.endswith(" 4M"):  # pointwise: one read + one write of the whole tensor
        row.update(bandwidth(args[0], compiled, tc if vs_torch else None))
    return row


def bandwidth(x: torch.Tensor, compiled: Any, tc: Any, rounds: int = 5) -> dict[str, float]:
    """GB/s moved by the compiled kernels, as a fraction of a plain copy's. On CUDA the kernels
    are timed without launch overhead (CUDA graph replay), so this measures the kernels, not Python.
    The copy and the kernels are timed in turn, `rounds` times, and each kernel is compared with
    the copy of its own round (the copy itself varies by a few percent from moment to moment)."""
    moved = 2 * x.numel() * x.element_size()
    timed = (lambda fn: device_seconds(fn, (x,))) if x.is_cuda else (lambda fn: median_call_seconds(fn, (x,)))
    kernels = {"copy": torch.empty_like(x).copy_, "mc": compiled, **({"tc": tc} if tc is not None else {})}
    samples = [{name: moved / timed(fn) / 1e9 for name, fn in kernels.items()} for _ in range(rounds)]
    row = {"copy_bandwidth_GBps": statistics.median(s["copy"] for s in samples),
           "mc_bandwidth_GBps": statistics.median(s["mc"] for s in samples)}
    for name in kernels.keys() - {"copy"}:
        row[f"{name}_fraction_of_copy"] = statistics.median(s[name] / s["copy"] for s in samples)
    return row


def warm_cache_seconds(device: str) -> float:
    """First-call time of cos(cos(x)) in a NEW process whose on-disk cache is already warm."""
    code = (
        "import torch, minicompiler, time\n"
        "from minicompiler.bench.workloads import double_cosine\n"
        f"x = torch.randn(1 << 22, device={device!r})\n"
        "f = minicompiler.compile(double_cosine)\n"
        "t = time.perf_counter(); f(x)\n"
        f"{'torch.cuda.synchronize()' if device == 'cuda' else ''}\n"
        "print(time.perf_counter() - t)\n"
    )
    run = lambda: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    run()  # fills the cache
    return float(run().stdout.strip().splitlines()[-1])


def print_table(rows: list[dict[str, Any]], vs_torch: bool) -> None:
    header = f"{'workload':32} {'eager ms':>10} {'minicomp ms':>12} {'speedup':>8} {'compile s':>10}"
    if vs_torch:
        header += f" {'torch.compile ms':>17} {'tc compile s':>13} {'mc/tc':>6}"
    print(header)
    print("-" * len(header))
    for r in rows:
        line = (
            f"{r['workload']:32} {r['eager_s'] * 1e3:10.3f} {r['mc_s'] * 1e3:12.3f} "
            f"{r['speedup_vs_eager']:7.2f}x {r['mc_first_call_s']:10.2f}"
        )
        if vs_torch:
            line += f" {r['tc_s'] * 1e3:17.3f} {r['tc_first_call_s']:13.2f} {r['mc_vs_torch_compile']:6.2f}"
        print(line)
    for r in rows:
        if "mc_fraction_of_copy" in r:
            tc = f", torch.compile {r['tc_fraction_of_copy']:.0%}" if "tc_fraction_of_copy" in r else ""
            print(
                f"{r['workload']}: minicompiler moves {r['mc_bandwidth_GBps']:.1f} GB/s = "
                f"{r['mc_fraction_of_copy']:.0%} of copy bandwidth ({r['copy_bandwidth_GBps']:.1f} GB/s){tc}"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m minicompiler.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--repeats", type=int, default=None, help="timed batches per median (default 20, quick 5)")
    parser.add_argument("--no-torch-compile", action="store_true", help="skip the torch.compile columns")
    parser.add_argument("--only", action="append",
                        help="run only workloads/models whose name contains this (with a final $: is this)")
    parser.add_argument("--quick", action="store_true", help="smaller models and fewer repeats")
    parser.add_argument("--modes", default=None,
                        help="comma-separated compile modes for the models (default: default,reduce-overhead,"
                             "max-autotune on cuda; default on cpu, where the others add CUDA graphs/Triton tuning)")
    parser.add_argument("--tasks", default="inference,training")
    parser.add_argument("--profile", action="store_true", help="per model: time per kernel, extern op, overhead")
    parser.add_argument("--no-kernels", action="store_true", help="skip the pointwise/reduction workloads")
    parser.add_argument("--no-models", action="store_true", help="skip the whole models")
    parser.add_argument("--deadline-s", type=float, default=float("inf"), help="start no model after this long")
    parser.add_argument("--json", type=Path, help="where to write the results")
    parser.add_argument("--html", type=Path, help="where to write the plotly chart (default: the JSON's, .html)")
    opts = parser.parse_args(argv)
    if opts.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda needs a CUDA GPU")
    started = time.perf_counter()
    repeats = opts.repeats or (5 if opts.quick else 20)
    modes = (opts.modes or ("default,reduce-overhead,max-autotune" if opts.device == "cuda" else "default")).split(",")
    cold_caches()
    vs_torch = not opts.no_torch_compile
    env = environment(opts.device)
    env.update(quick=opts.quick, modes=modes, repeats=repeats)
    print(" ".join(f"{k}={v}" for k, v in env.items()))
    rows: list[dict[str, Any]] = []
    if not opts.no_kernels:
        workloads = [w for w in WORKLOADS if not opts.only or any(s in w.name for s in opts.only)]
        for workload in workloads:
            rows.append(bench_workload(workload, opts.device, repeats, vs_torch))
            print(f"  done: {workload.name}", file=sys.stderr)
        print_table(rows, vs_torch)
        env["warm_cache_first_call_s"] = warm_cache_seconds(opts.device)
        print(f"cos(cos(x)) first call in a new process with a warm on-disk cache: "
              f"{env['warm_cache_first_call_s']:.3f} s")
    models: list[dict[str, Any]] = []
    html_path = opts.html or (opts.json.with_suffix(".html") if opts.json else None)

    def save(row: dict[str, Any] | None = None) -> None:
        """Write what is measured so far (after every model: a run stopped early keeps its rows)."""
        if row is not None:
            models.append(row)
        if opts.json:
            opts.json.parent.mkdir(parents=True, exist_ok=True)
            opts.json.write_text(json.dumps({"environment": env, "results": rows, "models": models}, indent=1))
        if html_path and models:
            write_html(html_path, env, models, format_rows(models), format_profiles(models))

    if not opts.no_models:
        run_models(opts.device, modes, opts.tasks.split(","), opts.only, opts.quick, repeats, vs_torch, opts.profile,
                   started + opts.deadline_s, save)
        print(format_rows(models))
        if profiles := format_profiles(models):
            print(profiles)
    save()
    for path in (opts.json, html_path if models else None):
        if path:
            print(f"wrote {path}")

if __name__ == "__main__":
    main()
