"""Dimension arguments in the one form later stages read: non-negative ints, sorted tuples.

PyTorch accepts `dim=-1`, `dim=None` ("all dims"), a single int or a list; the fuser and the
code generators should not each have to re-learn those conventions, so decompose writes
every dim argument out explicitly.
"""

from __future__ import annotations

from collections.abc import Sequence


def wrap_dim(dim: int, ndim: int) -> int:
    """`dim` as an index in range(ndim); a 0-d tensor accepts dim 0 and -1, as in PyTorch."""
    size = max(ndim, 1)
    if not -size <= dim < size:
        raise IndexError(f"dim {dim} out of range for a tensor with {ndim} dims")
    return dim % size


def reduction_dims(dims: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """The sorted, non-negative dims a reduction folds. None and () mean every dim (torch's rule)."""
    if dims is None or (not isinstance(dims, int) and len(dims) == 0):
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = (dims,)
    if ndim == 0:  # reducing "dim 0" of a scalar reduces nothing
        return ()
    return tuple(sorted({wrap_dim(d, ndim) for d in dims}))
