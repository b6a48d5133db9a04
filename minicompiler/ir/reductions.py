"""The reduction primitives beyond sum, amax and amin (ir/ops.py): prod, argmax and argmin, with
their signature: op(x, dims, keepdim), dims non-negative and sorted (() = all). A kernel computes
them in the same sweep over a row as the others, with another accumulator (codegen/cpp.py,
codegen/triton.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from minicompiler.ir.ops import register


def _over_rows(fn: Callable[..., torch.Tensor], x: torch.Tensor, dims: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    """fn(rows, -1) with the dims in `dims` (() = all) flattened, row-major, into one last dim."""
    dims = tuple(d % x.ndim for d in dims) if x.ndim else ()  # (a 0-d x accepts dim 0 and -1)
    dims = dims or tuple(range(x.ndim))
    kept = [d for d in range(x.ndim) if d not in dims]
    rows = x.permute((*kept, *dims)).reshape(*(x.shape[d] for d in kept), math.prod(x.shape[d] for d in dims))
    result = fn(rows, -1)
    return result.reshape([1 if d in dims else x.shape[d] for d in range(x.ndim)]) if keepdim else result


def _arg_extremum(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    # torch.argmax refuses bool (torch.max(x, dim) does not): as uint8 it orders the same
    return lambda x, dims, keepdim=False: _over_rows(fn, x.to(torch.uint8) if x.dtype == torch.bool else x,
                                                     dims, keepdim)


# torch.prod folds one dim at a time; integers and bool multiply in int64, as torch's
register("prod", "reduction", lambda x, dims, keepdim=False: _over_rows(torch.prod, x, dims, keepdim),
         "prod(x, dims, keepdim)")
# The position of the first largest (smallest) element in the row, counted row-major over `dims`; a NaN
# counts as larger (smaller) than any number, the first NaN wins. With all dims it is torch.argmax(x).
register("argmax", "reduction", _arg_extremum(torch.argmax), "argmax(x, dims, keepdim): int64")
register("argmin", "reduction", _arg_extremum(torch.argmin), "argmin(x, dims, keepdim): int64")
# the reductions whose result is a position: they compare values of their input's dtype
INDEX_REDUCTIONS = frozenset({"argmax", "argmin"})
