"""PerTensor: values kept per tensor identity, dropped with the tensor, never handed to another
tensor that reuses a dead one's id."""

import gc

import torch

from minicompiler.runtime.per_tensor import PerTensor


def test_value_per_tensor_identity_not_equality():
    kept, a, b = PerTensor(), torch.zeros(3), torch.zeros(3)
    kept[a] = "a"
    assert kept.get(a) == "a" and kept.get(b) is None  # equal values, another tensor
    kept[b] = "b"
    assert (kept.get(a), kept.get(b), len(kept)) == ("a", "b", 2)


def test_entry_goes_with_its_tensor():
    kept, a = PerTensor(), torch.ones(2)
    kept[a] = "a"
    del a
    gc.collect()
    assert len(kept) == 0
    for _ in range(100):  # new tensors, some at a dead one's id: none sees its value
        assert kept.get(torch.ones(2)) is None
