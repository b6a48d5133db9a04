"""torch.vmap of functions of scalars (transformers 4's mask functions), captured by broadcasting;
the TorchFunctionMode those masks are made under, and `torch.autocast(enabled=False)` blocks."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

import minicompiler


def causal(b, h, q, kv):
    return kv <= q


def padded(mask):
    def inner(b, h, q, kv):
        return mask[b, kv]
    return inner


def both(*fns):
    def inner(b, h, q, kv):  # as transformers' and_masks
        result = q.new_ones((), dtype=torch.bool)
        for fn in fns:
            result = result & fn(b, h, q, kv).to(result.device)
        return result
    return inner


def bhqkv(fn):
    for dims in [(None, None, None, 0), (None, None, 0, None), (None, 0, None, None), (0, None, None, None)]:
        fn = torch.vmap(fn, in_dims=dims, out_dims=0)
    return fn


def make_mask(x, attention_mask):
    b, q = attention_mask.shape
    with TransformGetItemToIndex():
        mask = bhqkv(both(causal, padded(attention_mask.bool())))(
            torch.arange(b), torch.arange(1), torch.arange(q), torch.arange(q))
    return torch.where(mask, x, 0.0)


def test_nested_vmaps_of_a_mask_function_make_one_graph() -> None:
    attention_mask = torch.ones(2, 5, dtype=torch.long)
    attention_mask[0, 3:] = 0
    x = torch.randn(2, 1, 5, 5)
    explained = minicompiler.explain(make_mask)(x, attention_mask)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.to_text()
    torch.testing.assert_close(minicompiler.compile(make_mask)(x, attention_mask), make_mask(x, attention_mask))


def summed(x, w):
    return torch.vmap(lambda row: (row * w).sum())(x)  # a reduction per item: not elementwise


def scaled(x, w):
    return torch.vmap(lambda v: v * w[0] + 1)(x)  # 1-d items; w[0] unmapped and 0-d


def outer(x, w):
    return torch.vmap(lambda v: v * w)(x)  # each item times a vector: broadcasting alone would be wrong


@pytest.mark.parametrize("fn, shapes, breaks", [(summed, [(3, 4), (4,)], 1), (outer, [(3,), (3,)], 1),
                                                (scaled, [(6,), (2,)], 0)])
def test_what_broadcasting_cannot_do_is_a_break(fn, shapes, breaks: int) -> None:
    args = [torch.randn(s) for s in shapes]
    explained = minicompiler.explain(fn)(*args)
    assert explained.graph_break_count == breaks, explained.to_text()
    torch.testing.assert_close(minicompiler.compile(fn)(*args), fn(*args))


def rotary(x):
    with torch.autocast(device_type="cpu", enabled=False):  # as Llama's rotary embedding
        return x.float().sin()


def test_autocast_disabled_is_a_no_op_block() -> None:
    x = torch.randn(4)
    explained = minicompiler.explain(rotary)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.to_text()
    torch.testing.assert_close(minicompiler.compile(rotary)(x), rotary(x))
