"""Views made in one step from the buffer they view (codegen/wrapper.py `direct_views`): a chain of
reshape/permute/slice becomes one `reinterpret_tensor` of the chain's buffer, and results stay
those of eager wherever the buffer starts, whatever the chain, in inference and training."""

from __future__ import annotations

import pytest
import torch

import minicompiler


def _wrapper(compiled: minicompiler.CompiledFunction) -> str:
    return compiled.report.graphs[0].stage("codegen").text


def heads(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    qkv = (x @ w).reshape(2, 5, 3, 4, 2).permute(2, 0, 3, 1, 4)  # as an attention splits q, k, v
    q, k, v = qkv[0], qkv[1], qkv[2]
    return (q * k + v).sum(-1)


def test_a_chain_becomes_one_view_of_its_buffer() -> None:
    torch.manual_seed(0)
    x, w = torch.randn(2, 5, 6), torch.randn(6, 24)
    compiled = minicompiler.compile(heads)
    torch.testing.assert_close(compiled(x, w), heads(x, w))
    text = _wrapper(compiled)
    # k and v, each from the product's memory; q starts where the product does, and only the
    # kernel reads it: the kernel is handed the product itself (`kernel_only_views`)
    assert text.count("reinterpret_tensor(") == 2
    assert "ops.permute" not in text and "ops.slice" not in text


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_views_only_kernels_read_are_their_buffers(backend: str) -> None:
    """A bias reshaped to (1, C, 1, 1) for a kernel, and a product viewed back as an image: no
    view is made, the kernel reads the buffers (with the view's strides, which it was generated
    for); a view an extern reads, or the graph returns, is still made."""
    def f(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        image = (x @ w).reshape(2, 3, 4, 5) + bias.reshape(1, 3, 1, 1)
        flat = image.relu().reshape(2, 60)
        return flat @ w.t(), image.sum(dim=(2, 3))

    torch.manual_seed(0)
    x, w, bias = torch.randn(2, 60), torch.randn(60, 60), torch.randn(3)
    compiled = minicompiler.compile(f, backend=backend)
    for got, expected in zip(compiled(x, w, bias), f(x, w, bias), strict=True):
        torch.testing.assert_close(got, expected)
    text = _wrapper(compiled).split("def call(", 1)[1]
    assert "reinterpret_tensor(bias" not in text and "reinterpret_tensor(matmul" not in text
    assert "reinterpret_tensor(w," in text  # w.t(), which the second matmul (an extern) reads


def test_inputs_that_start_inside_their_memory() -> None:
    """An input that is itself a slice (storage offset > 0): the view's offset adds to its own."""
    torch.manual_seed(0)
    base, w = torch.randn(3, 2, 5, 6), torch.randn(6, 24)
    compiled = minicompiler.compile(lambda x, w: heads(x.reshape(2, 5, 6) * 1, w) + x.reshape(10, 6)[:, :4].sum())
    for x in (base[1], base[2]):
        assert x.storage_offset() > 0
        torch.testing.assert_close(compiled(x, w), heads(x.reshape(2, 5, 6), w) + x.reshape(10, 6)[:, :4].sum())


def test_a_reshape_that_copies_is_not_a_view() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x.t() + 1).t().reshape(-1)[3:9].reshape(2, 3) * 2  # the transposed reshape copies

    torch.manual_seed(0)
    x = torch.randn(4, 5)
    torch.testing.assert_close(minicompiler.compile(f)(x), f(x))


def test_returned_views_are_views() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x * 2
        return y, y.reshape(3, 4).t()[1:]

    x = torch.randn(12)
    y, view = minicompiler.compile(f)(x)
    torch.testing.assert_close(view, f(x)[1])
    view.mul_(0)  # a view of y, as in eager: writing it writes y
    assert y.reshape(3, 4).t()[1:].abs().sum() == 0


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_training_through_views(backend: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 5, 6)
    w = torch.randn(6, 24, requires_grad=True)
    compiled = minicompiler.compile(heads, backend=backend)
    out = compiled(x, w)
    (grad,) = torch.autograd.grad(out.square().sum(), w)
    w_eager = w.detach().clone().requires_grad_()
    (expected,) = torch.autograd.grad(heads(x, w_eager).square().sum(), w_eager)
    torch.testing.assert_close(out, heads(x, w_eager))
    torch.testing.assert_close(grad, expected)


def test_reinterpret_tensor_counts_from_the_tensors_start() -> None:
    """Both ways it is made (torch's private fast call, or as_strided where autograd records)
    give the same view of a tensor that starts inside its memory, and the recorded one has a
    gradient."""
    from minicompiler.runtime.relayout import reinterpret_tensor

    base = torch.randn(30)
    x = base[7:19]
    fast = reinterpret_tensor(x, (3, 2), (4, 1), 1)
    torch.testing.assert_close(fast, x.reshape(3, 4)[:, 1:3])
    leaf = x.clone().requires_grad_()
    recorded = reinterpret_tensor(leaf, (3, 2), (4, 1), 1)
    torch.testing.assert_close(recorded, fast)
    (grad,) = torch.autograd.grad(recorded.sum(), leaf)
    assert grad.sum() == 6 and grad.reshape(3, 4)[:, 0].sum() == 0
