"""The op table's one scatter, `store_at`: load_at's mirror image. Where load_at reads x at computed
positions, store_at writes values at computed positions into a copy of a base tensor:

    out = base, then for each element p of values:  out.flat[position[p]] = combine(out.flat[...], values[p])

A kernel computing one iterates over the *values'* elements (position and values are formulas
computed there, as load_at's indices are) and writes into a buffer that starts as base's copy
(codegen/body.py `store_at`; fuse/buffers.py says whose memory that is). With repeated positions
the combines that accumulate (add, amax, amin) are atomic in Triton, and C++ runs such a loop
serially (replace, amax, amin: in order, so the last write wins as in eager's CPU kernels) or with
`omp atomic` adds; a replace at repeated positions is undefined in torch too.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from minicompiler.ir.ops import register

Combine = Literal["replace", "add", "amax", "amin"]
# dtypes whose accumulating combines both backends write as atomics: Triton has none for bool and
# 8/16-bit integers, and GPUs none for bfloat16 before the H100 (other dtypes stay torch calls)
ATOMIC_DTYPES = frozenset({torch.float32, torch.float64, torch.int32, torch.int64})


def store_at(base: torch.Tensor, position: torch.Tensor, values: Any, combine: Combine) -> torch.Tensor:
    """A copy of base with values (cast to its dtype) combined in at the flat positions (int64, in
    range: the decompositions check them), position and values broadcast together."""
    out = base.clone(memory_format=torch.contiguous_format)
    position = torch.as_tensor(position, device=base.device)
    values = torch.as_tensor(values, dtype=base.dtype, device=base.device)
    shape = torch.broadcast_shapes(position.shape, values.shape)
    flat = position.broadcast_to(shape).reshape(-1)
    values = values.broadcast_to(shape).reshape(-1)
    if combine == "replace":
        out.view(-1).index_put_((flat,), values)
    elif combine == "add":
        out.view(-1).index_add_(0, flat, values)
    else:
        out.view(-1).scatter_reduce_(0, flat, values, combine, include_self=True)
    return out


register(
    "store_at", "scatter", store_at,
    "store_at(base, position, values, combine): a copy of base with each element of values combined "
    "('replace', 'add', 'amax', 'amin') into it at its flat position (int64, in range)",
)

# torch-level scatters, written with store_at by decompose/scatters.py (captured by capture/torch_scatters.py)
for _name, _fn in {
    "scatter": lambda x, dim, index, src: torch.scatter(x, dim, index, src),
    "scatter_reduce": lambda x, dim, index, src, reduce, include_self=True: torch.scatter_reduce(
        x, dim, index, src, reduce, include_self=include_self),
    "index_add": lambda x, dim, index, source, alpha=1: torch.index_add(x, dim, index, source, alpha=alpha),
    "index_copy": torch.index_copy,
    "index_put": lambda x, indices, values, accumulate=False: torch.index_put(x, indices, values, accumulate),
    "put": lambda x, index, source, accumulate=False: torch.put(x, index, source, accumulate),
    "masked_scatter": torch.masked_scatter,
}.items():
    register(_name, "composite", _fn)
