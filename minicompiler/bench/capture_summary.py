"""How a compiled model was captured, in one line: for the sweeps over models from libraries
(benchmarks/transformers_sweep.py, benchmarks/timm_sweep.py)."""

from __future__ import annotations

from typing import Any


def capture_summary(compiled: Any, indent: int) -> str:
    """`graphs N  breaks N  torch fallbacks N  run eagerly N` for a compiled function or module
    that has run, and below it, `indent` spaces in, the first break's reason and place."""
    reports = compiled.reports
    breaks = [b for r in reports for b in r.graph_breaks]
    fallbacks = sum(g.fallback is not None for r in reports for g in r.graphs)
    eager = sum(r.eager_fallback is not None for r in reports)
    line = (f"graphs {sum(len(r.graphs) for r in reports)}  breaks {len(breaks)}  torch fallbacks {fallbacks}  "
            f"run eagerly {eager}")
    if breaks:
        first = breaks[0]
        where = f"{first.filename.split('site-packages/')[-1]}:{first.lineno}"
        line += f"\n{'':{indent}} first break: {first.reason} ({where}: {first.line.strip()})"
    return line
