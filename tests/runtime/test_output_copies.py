"""The copies a CUDA graph runner hands out (runtime/cuda_graphs.py `_copy_out`): one block of memory
per dtype for the dense outputs, each copy with its tensor's values and strides and memory of its
own; other outputs cloned; and what a replay hands out at each output (`_plan_outputs`). Runs on
the CPU too: nothing here needs a graph."""

import torch

from minicompiler.runtime.cuda_graphs import CUDAGraphRunner, _copy_out, _plan_copies


def _copies(tensors):
    return _copy_out(_plan_copies(tensors), tensors)


def test_copies_have_the_values_and_strides_and_memory_of_their_own():
    tensors = [torch.randn(64, 3, 7, 7).contiguous(memory_format=torch.channels_last), torch.randn(5),
               torch.randn(3, 4).t(), torch.randn(2, 3), torch.arange(6), torch.randn(0)]
    copies = _copies(tensors)
    for tensor, copy in zip(tensors, copies, strict=True):
        assert copy.stride() == tensor.stride() and copy.dtype == tensor.dtype
        torch.testing.assert_close(copy, tensor)
    before = [t.clone() for t in tensors]
    for tensor in tensors:
        tensor.zero_()  # as the next replay overwrites the graph's outputs
    for copy, value in zip(copies, before, strict=True):
        torch.testing.assert_close(copy, value)


def test_dense_copies_of_one_dtype_share_one_block_each_aligned():
    channels_last = torch.randn(2, 8, 4, 4).contiguous(memory_format=torch.channels_last)
    tensors = [torch.randn(3), torch.randn(17, 5), channels_last]
    copies = _copies(tensors)
    storages = {c.untyped_storage().data_ptr() for c in copies}
    assert len(storages) == 1
    assert all(c.data_ptr() % 64 == 0 for c in copies)
    ends = sorted((c.data_ptr(), c.data_ptr() + 4 * c.numel()) for c in copies)
    assert all(end <= start for (_, end), (start, _) in zip(ends, ends[1:], strict=False))  # no overlap


def test_a_strided_view_is_cloned():
    base = torch.randn(8, 8)
    every_other = base[:, ::2]  # not dense: a copy with its strides would need more memory
    copies = _copies([every_other, base])
    torch.testing.assert_close(copies[0], every_other)
    assert copies[0].untyped_storage().data_ptr() != copies[1].untyped_storage().data_ptr()


def test_each_replay_copies_into_new_memory_as_planned_at_recording():
    """The plan (blocks, places) is worked out once; every replay's copies are new tensors with
    the outputs' values of that replay."""
    x = torch.randn(4, 3)
    out = x * 2
    runner = _planned((out, out.t()), [x], [False])
    first = runner._outputs([x])
    out.add_(1)  # as the next replay overwrites the graph's outputs
    second = runner._outputs([x])
    torch.testing.assert_close(first[0] + 1, second[0])
    assert first[0].data_ptr() != second[0].data_ptr() and second[1].stride() == out.t().stride()


def _planned(outputs, inputs, borrowed, lend_last=0):
    """A runner whose recording gave `outputs` from `inputs` (the graph itself needs a GPU; what a
    replay hands out is planned, and handed out, without one)."""
    runner = CUDAGraphRunner(lambda _: None, lend_last=lend_last)
    runner.static_inputs = [t if b else t.clone() for t, b in zip(inputs, borrowed, strict=True)]
    runner.borrowed, runner.static_outputs = borrowed, outputs
    runner._plan_outputs()
    return runner


def test_a_replay_hands_out_inputs_copies_and_lent_outputs_in_the_recorded_structure():
    """Each output as planned at recording: a borrowed input passed through is the caller's
    tensor, the last `lend_last` are lent (aliases of the graph's memory), the others are copies,
    the same tensor twice is one copy, and nested outputs keep their nesting."""
    x, weight = torch.randn(3), torch.nn.Parameter(torch.randn(3))
    doubled, saved = x * 2, x.cos()
    runner = _planned(((doubled,), weight, 5, doubled, saved), [x, weight], [False, True], lend_last=1)
    (first,), passed, five, second, lent = runner._outputs([x, weight])
    assert passed is weight and five == 5 and first is second and first.data_ptr() != doubled.data_ptr()
    torch.testing.assert_close(first, doubled)
    assert lent.data_ptr() == saved.data_ptr() and lent is not saved
    assert _planned({"out": [doubled]}, [x], [False])._outputs([x]).keys() == {"out"}
