"""A variance's gradient is 2 * (x - mean) / (n - correction), with no reduction in the backward
(decompose/reductions.py detaches the mean it centres on: its gradient would be multiplied by
sum(x - mean), which is 0). Checked against eager on fresh random inputs."""

import pytest
import torch
import torch.nn.functional as F

import minicompiler


def backward_sums(compiled) -> int:
    backward = next(s for s in compiled.report.graphs[0].autograd if s.name == "backward")
    return backward.text.count("ops.sum(")


@pytest.mark.parametrize(("fn", "sums"), [
    (lambda x: x.var(1), 0),
    (lambda x: x.std(0, correction=0), 0),
    (lambda x: torch.var_mean(x, (0, 1))[0], 0),
    (lambda x: F.layer_norm(x, (x.shape[-1],)), 2),  # sum(g) and sum(g * xhat), as torch's backward
])
def test_variance_gradient_equals_eager_without_the_mean_pass(fn, sums):
    compiled = minicompiler.compile(fn)
    for _ in range(2):
        x = (torch.randn(6, 9, dtype=torch.float64) * 3 + 5).requires_grad_()
        weight = torch.randn_like(fn(x))
        (ours,) = torch.autograd.grad((compiled(x) * weight).sum(), x)
        (theirs,) = torch.autograd.grad((fn(x) * weight).sum(), x)
        torch.testing.assert_close(ours, theirs)
    assert backward_sums(compiled) == sums
