"""A C++ scatter that adds (store_at 'add') runs on many threads with `omp atomic` adds, and skips the
adds of 0: a max pool's backward adds a window's gradient at its maximum and 0 at the 8 other
places of a 3x3 window, and each atomic costs the same whatever it adds."""

import torch
import torch.nn.functional as F

import minicompiler


def pool(x: torch.Tensor) -> torch.Tensor:
    return F.max_pool2d(x, 3, 2, 1)


def test_a_max_pool_backward_adds_only_the_gradients_and_matches_eager() -> None:
    x = torch.randn(2, 3, 9, 9)
    x[0, 0, :3, :3] = 1.0  # a window of ties: its gradient goes to the first maximum, as eager's
    compiled = minicompiler.compile(pool, backend="cpp")
    mine, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    grad = torch.randn(2, 3, 5, 5)
    compiled(mine).backward(grad)
    pool(theirs).backward(grad)
    torch.testing.assert_close(mine.grad, theirs.grad)
    backward = compiled.report.graphs[0].stage("codegen (backward)").text
    atomic = backward.index("#pragma omp atomic")
    assert backward[:atomic].rstrip().endswith("!= 0) {"), backward[atomic - 200 : atomic + 100]
