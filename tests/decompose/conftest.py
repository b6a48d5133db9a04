"""Shared by the lowering tests: what "lowered" means, checked on a compiled function's report."""

from __future__ import annotations

from typing import Any


def assert_generated(compiled: Any) -> None:
    """Every step ran in kernels minicompiler wrote: no opaque torch call left in the graphs."""
    kinds = {k.kind for g in compiled.report.graphs for k in g.kernels}
    assert kinds and "extern" not in kinds, kinds
