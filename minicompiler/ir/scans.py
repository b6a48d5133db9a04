"""The scan primitives: op(x, dim) has x's shape, each element the combination of every element
up to it along `dim` (a running sum, product, max, ...). A kernel computes one by sweeping each
row of `dim` in order with an accumulator it never resets within the row (codegen/body.py), so
the fuser treats a scan like a reduction over `dim` whose result is an element value.
"""

from __future__ import annotations

import torch

from minicompiler.ir.ops import register

register("cumsum", "scan", torch.cumsum, "cumsum(x, dim): integers and bool add up in int64")
register("cumprod", "scan", torch.cumprod, "cumprod(x, dim): integers and bool multiply in int64")
register("cummax", "scan", lambda x, dim: torch.cummax(x, dim).values, "cummax(x, dim): NaN once one is met")
register("cummin", "scan", lambda x, dim: torch.cummin(x, dim).values, "cummin(x, dim): NaN once one is met")
# the position of the running max (min): of equal values the *last* one, and the last NaN once one is met
register("cummax_index", "scan", lambda x, dim: torch.cummax(x, dim).indices, "cummax_index(x, dim): int64")
register("cummin_index", "scan", lambda x, dim: torch.cummin(x, dim).indices, "cummin_index(x, dim): int64")
register("logcumsumexp", "scan", torch.logcumsumexp, "logcumsumexp(x, dim): log(cumsum(exp(x)))")

# Where a scan's accumulator starts: the identity of the reduction that combines the same way
# (logcumsumexp's is -inf, amax's); index scans keep the value they compare beside the position.
SCAN_REDUCTION = {"cumsum": "sum", "cumprod": "prod", "cummax": "amax", "cummin": "amin",
                  "cummax_index": "argmax", "cummin_index": "argmin", "logcumsumexp": "amax"}
INDEX_SCANS = frozenset({"cummax_index", "cummin_index"})
