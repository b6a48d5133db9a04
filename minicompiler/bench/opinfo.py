"""Run PyTorch's own OpInfo samples through minicompiler and say, per op, how it was compiled.

`torch.testing._internal.common_methods_invocations.op_db` lists ~600 ops, each with sample inputs
(awkward shapes, scalars, keyword arguments). For each op we compile `op(sample)` and read the
CompileReport to classify it:

  generated  every sample ran through kernels minicompiler wrote (or views of its inputs; a check
             that indices a user gave are in range, before a gather, may run in torch)
  extern     some node stayed an opaque call into torch inside the compiled graph
  fallback   a graph break, or the graph ran eagerly (the report says why)
  wrong      the compiled result differs from eager
  error      compiling or running raised where eager did not
  timeout    one sample took longer than the per-op limit

The worst status over an op's samples wins (wrong > error > timeout > fallback > extern > generated).

    python -m minicompiler.bench.opinfo                 # every op, 2 samples each, counts
    python -m minicompiler.bench.opinfo --json out.json # and the table op -> status
    python -m minicompiler.bench.opinfo --ops add,sin --verbose
"""

from __future__ import annotations

import argparse
import functools
import json
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import torch

STATUSES = ("generated", "extern", "fallback", "timeout", "error", "wrong")  # best to worst


def op_db() -> list[Any]:
    """OpInfos that support float32 on the CPU, one per (name, variant)."""
    from torch.testing._internal.common_methods_invocations import op_db as ops

    return [op for op in ops if torch.float32 in op.supported_dtypes("cpu")]


def op_key(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _samples(op: Any, count: int) -> Iterator[Any]:
    torch.manual_seed(0)
    samples = op.sample_inputs("cpu", torch.float32, requires_grad=False)
    for i, sample in enumerate(samples):
        if i >= count:
            return
        yield sample


def _report_status(report: Any) -> tuple[str, str]:
    """generated / extern / fallback, with the reason, from one compilation's report."""
    if report is None:
        return "fallback", "nothing was compiled"
    if report.eager_fallback:
        return "fallback", report.eager_fallback
    if report.graph_breaks:
        return "fallback", report.graph_breaks[0].reason
    for graph in report.graphs:
        if graph.fallback:
            return "fallback", graph.fallback
    externs = [n for g in report.graphs for k in g.kernels if k.kind == "extern" for n in k.nodes]
    if externs:
        return "extern", ", ".join(externs)
    return "generated", ""


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]


def _same(expected: Any, actual: Any) -> str:
    """'' when `actual` matches eager's `expected`, else what differs."""
    exp, act = _flat(expected), _flat(actual)
    if len(exp) != len(act):
        return f"{len(act)} outputs, eager gives {len(exp)}"
    for e, a in zip(exp, act, strict=False):
        if isinstance(e, torch.Tensor):
            try:
                torch.testing.assert_close(a, e, equal_nan=True, rtol=1e-4, atol=1e-5)
            except (AssertionError, TypeError, RuntimeError) as err:
                return str(err).splitlines()[0] if str(err) else type(err).__name__
        elif e != a and not (isinstance(e, float) and e != e and a != a):
            return f"{a!r} != {e!r}"
    return ""


def _check_sample(op: Any, sample: Any, backend: str) -> tuple[str, str]:
    import minicompiler

    fn, args, kwargs = op.op, (sample.input, *sample.args), dict(sample.kwargs)

    def program(*inputs: Any) -> Any:
        return fn(*inputs, **kwargs)

    try:
        expected = program(*args)
        again = program(*args)
    except Exception:  # eager raises too: not ours to judge
        return "skip", ""
    compiled = minicompiler.compile(program, backend=backend)
    try:
        actual = compiled(*args)
    except TimeoutError:
        raise
    except Exception as err:
        return "error", f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    status, why = _report_status(compiled.report)
    # eager disagrees with itself (random ops), or its values are undefined (empty): compare nothing
    if _same(expected, again) or "empty" in op.name:
        return status, why
    diff = _same(expected, actual)
    return ("wrong", diff) if diff else (status, why)


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError


def classify(op: Any, samples: int = 2, backend: str = "cpp", timeout: float = 60.0) -> tuple[str, str]:
    """The worst status over the first `samples` samples of `op`, with its reason."""
    worst, reason = "generated", ""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        seen = 0
        for sample in _samples(op, samples):
            status, why = _check_sample(op, sample, backend)
            if status == "skip":
                continue
            seen += 1
            if STATUSES.index(status) > STATUSES.index(worst):
                worst, reason = status, why
        if seen == 0:
            return "skip", "no sample eager accepts"
    except TimeoutError:
        return "timeout", f"over {timeout:.0f} s"
    except Exception as err:  # building the samples failed
        return "skip", f"samples: {type(err).__name__}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return worst, reason


def _classify_by_name(key: str, samples: int, backend: str, timeout: float) -> tuple[str, str, str]:
    torch.set_num_threads(1)
    op = next(op for op in op_db() if op_key(op) == key)
    return (key, *classify(op, samples, backend, timeout))


def run(keys: list[str], samples: int, backend: str, timeout: float, jobs: int) -> dict[str, tuple[str, str]]:
    """Classify the ops named `keys`, in `jobs` processes; {op: (status, reason)}."""
    if jobs <= 1:
        results = [_classify_by_name(k, samples, backend, timeout) for k in keys]
    else:
        with ProcessPoolExecutor(jobs) as pool:
            task = functools.partial(_classify_by_name, samples=samples, backend=backend, timeout=timeout)
            results = list(pool.map(task, keys))
    return {key: (status, why) for key, status, why in results}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default="", help="comma-separated op names (default: all)")
    parser.add_argument("--samples", type=int, default=2, help="samples per op")
    parser.add_argument("--backend", default="cpp")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per op")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", help="write {op: status} here")
    parser.add_argument("--verbose", action="store_true", help="print every op with its reason")
    args = parser.parse_args(argv)
    keys = [op_key(op) for op in op_db()]
    if args.ops:
        wanted = set(args.ops.split(","))
        keys = [k for k in keys if k in wanted or k.split(".")[0] in wanted]
    start = time.perf_counter()
    results = run(keys, args.samples, args.backend, args.timeout, args.jobs)
    for key, (status, why) in sorted(results.items()):
        if args.verbose or status in ("wrong", "error", "timeout"):
            print(f"{status:9} {key:40} {why[:150]}")
    counts = Counter(status for status, _ in results.values())
    print(f"{len(results)} ops, {time.perf_counter() - start:.0f} s, backend {args.backend}, "
          f"torch {torch.__version__}: " + ", ".join(f"{s} {counts[s]}" for s in (*STATUSES, "skip")))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({k: v[0] for k, v in sorted(results.items())}, out, indent=1)
            out.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
