"""What `load_at` (the op table's one gather) means, run by torch: the reference interpreter and
shape inference run `load_at`; `check_indices` guards it where a user gives the indices; and
`accumulate_at` is its backward where no atomic adds exist for the dtype (float16, bfloat16): the
adjoint that the VJP rule calls at flat positions (other dtypes: a `store_at`, ir/scatter.py);
`accumulate_rows` its backward on the CPU for a read of whole rows (an embedding)."""

from __future__ import annotations

from typing import Any

import torch


def load_at(x: torch.Tensor, indices: tuple[Any, ...]) -> torch.Tensor:
    """out[p] = x[indices[0][p], indices[1][p], ...]: one index (a tensor or an int) per dim of x."""
    return x[tuple(torch.as_tensor(i, device=x.device) for i in indices)]


def check_indices(index: torch.Tensor, low: int, high: int) -> torch.Tensor:
    """`index` itself, once every element is in [low, high); else IndexError, as eager raises."""
    if index.device.type == "meta" or index.numel() == 0:
        return index
    if index.device.type == "cpu":
        if bool(index.min() < low) or bool(index.max() >= high):
            bad = index[(index < low) | (index >= high)][0].item()
            raise IndexError(f"index {bad} is out of bounds for a dim of size {high - max(low, 0)}")
    else:  # no wait for the GPU: the next kernel fails if this does
        torch._assert_async(((index >= low) & (index < high)).all(), "index out of bounds")
    return index


def accumulate_at(shape: tuple[int, ...], position: Any, grad: torch.Tensor) -> torch.Tensor:
    """Zeros of `shape` with each element of `grad` added at its flat `position` in them (load_at's
    backward in float16/bfloat16: an element read twice, as by repeat, a gather or overlapping pool
    windows, gets both gradients). The positions come computed by a generated kernel
    (autograd/shape_rules.py).

    One `index_add_`: on the GPU that is atomic adds, where `index_put_` with accumulate sorts the
    indices first (7.5 of a 24.6 ms ResNet-18 training step on the H100)."""
    out = torch.zeros(shape, dtype=grad.dtype, device=grad.device)
    flat = torch.as_tensor(position, device=grad.device).broadcast_to(grad.shape).reshape(-1)
    out.view(-1).index_add_(0, flat, grad.reshape(-1))
    return out


def accumulate_rows(shape: tuple[int, ...], rows: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """Zeros of `shape` (rows, width) with each row of `grad` (.., width) added at its row number
    in `rows` (.., 1): an embedding's backward, as eager's CPU kernel does it for a batch of tokens,
    one vectorized add per row (`index_add_`), where a generated scatter made one atomic add per
    element (0.77 ms for 256 tokens of 256 on the 2-core CPU)."""
    out = torch.zeros(shape, dtype=grad.dtype, device=grad.device)
    out.index_add_(0, rows.reshape(-1), grad.reshape(-1, shape[-1]))
    return out
