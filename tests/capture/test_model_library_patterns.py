"""What model libraries do in forward, from the models that broke the graph until it was captured
(Gemma, BART, Falcon, Swin from Hugging Face; RegNet and GhostNet from timm), as small programs.

Each program compiles to one graph with no break and matches eager on fresh inputs, unless a
test says otherwise.
"""

from __future__ import annotations

import functools

import pytest
import torch

import minicompiler

from .conftest import compiles_whole


# -- functools.partial made outside: Hugging Face's tanh GELU ---------------------------------------
class PartialActivation(torch.nn.Module):
    """transformers' `PytorchGELUTanh` (Gemma's activation): a partial of F.gelu, called by forward."""

    def __init__(self) -> None:
        super().__init__()
        self.act = functools.partial(torch.nn.functional.gelu, approximate="tanh")
        self.scaled = functools.partial(torch.add, alpha=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scaled(self.act(x), x)


def test_a_partial_made_outside_is_called_with_its_own_arguments_first() -> None:
    module = PartialActivation()
    compiles_whole(module, torch.randn(4, 8))
    compiled = minicompiler.compile(module, backend="eager")
    x = torch.randn(4, 8)
    compiled(x)
    module.act = functools.partial(torch.nn.functional.gelu, approximate="none")  # another partial: guarded
    torch.testing.assert_close(compiled(x), module(x))


# -- assigning into part of a tensor: BART's shift_tokens_right ---------------------------------------
def shift_tokens_right(input_ids: torch.Tensor, start: int = 2, pad: int = 1) -> torch.Tensor:
    shifted = input_ids.new_zeros(input_ids.shape)
    shifted[:, 1:] = input_ids[:, :-1].clone()
    shifted[:, 0] = start
    shifted.masked_fill_(shifted == -100, pad)
    return shifted


def spelled_keys(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    x[..., 1, None] = v  # an ellipsis, a None, a value broadcast
    x[0, ::2] = 3.5  # a step
    x[1:, :, -1] = v.sum()  # a negative index, a 0-d tensor
    return x


def test_slice_and_index_assignments_are_captured() -> None:
    ids = torch.randint(-100, 50, (3, 7))
    torch.testing.assert_close(compiles_whole(shift_tokens_right, ids), shift_tokens_right(ids))
    compiles_whole(spelled_keys, torch.randn(2, 4, 3), torch.randn(2, 4, 1))
    compiled = minicompiler.compile(spelled_keys, backend="cpp")
    x, v = torch.randn(2, 4, 3), torch.randn(2, 4, 1)
    torch.testing.assert_close(compiled(x, v), spelled_keys(x, v))


def test_an_assignment_passes_gradients_as_eager() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = x * w
        y[:, 0] = w[0] ** 2  # the overwritten part's gradient is the value's, not y's
        return y

    compiled = minicompiler.compile(fn)
    x, w = torch.randn(4, 5), torch.randn(5)
    mine, theirs = w.clone().requires_grad_(), w.clone().requires_grad_()
    grad = torch.randn(4, 5)
    compiled(x, mine).backward(grad)
    fn(x, theirs).backward(grad)
    torch.testing.assert_close(mine.grad, theirs.grad)


def test_an_assignment_seen_through_a_view_falls_back_and_stays_right() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        row = y[0]  # a view of y: writing into y changes it
        y[0, 1:] = 0.0
        return row * 2

    compiled = minicompiler.compile(fn)
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), fn(x))


# -- a short list of ints as an index: Falcon's fused QKV split ----------------------------------------
LIST_INDEXES = {
    "falcon": lambda x: (x[..., :-2, :], x[..., [-2], :], x[..., [-1], :]),
    "first dim": lambda x: x[[1, 0]],
    "repeats": lambda x: x[:, [0, 2, 2]],
    "after an ellipsis": lambda x: x[..., [3, 0]],
    "an int apart": lambda x: x[1, :, [0, 2]],  # torch selects the int first (NumPy would not)
    "None around": lambda x: x[None, :, [1], None],
}


@pytest.mark.parametrize("name", sorted(LIST_INDEXES))
def test_a_short_list_of_ints_indexes_as_joined_slices(name: str) -> None:
    compiles_whole(LIST_INDEXES[name], torch.randn(2, 3, 5, 4))


def test_a_list_index_passes_gradients_as_eager() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x[:, [2, 0, 2]] * 3

    ours = torch.randn(4, 3, requires_grad=True)
    theirs = ours.detach().clone().requires_grad_()
    minicompiler.compile(fn)(ours).sum().backward()
    fn(theirs).sum().backward()
    torch.testing.assert_close(ours.grad, theirs.grad)


# -- a module that sets its own plain attribute in forward: Swin's shift size --------------------------
class ShrinksItsWindow(torch.nn.Module):
    """transformers' SwinLayer: `self.shift_size = 0` when the input is no larger than a window."""

    def __init__(self) -> None:
        super().__init__()
        self.shift_size, self.window = 2, 4
        self.scale = torch.nn.Parameter(torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] <= self.window:
            self.shift_size = 0
        return torch.roll(x, self.shift_size, -1) * self.scale


def test_a_plain_attribute_a_module_sets_is_written_after_the_graph() -> None:
    module = ShrinksItsWindow()
    compiled = minicompiler.compile(module, backend="eager")
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), ShrinksItsWindow()(x))
    assert module.shift_size == 0
    torch.testing.assert_close(compiled(x), module(x))  # the write seen by the next call's guards
    assert not compiled.reports[0].graph_breaks
    compiles_whole(ShrinksItsWindow(), torch.randn(3, 4))


def test_a_module_member_set_in_forward_still_breaks() -> None:
    class SetsAParameter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.w = torch.nn.Parameter(x.detach().clone())  # registers a new parameter: not captured
            return x * 2

    explained = minicompiler.explain(SetsAParameter())(torch.randn(3))
    assert any("assigning the attribute .w" in b.reason for b in explained.breaks), explained.to_text()


# -- a module looping over its own children: timm's RegNet stages --------------------------------------
class Stage(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        shared = torch.nn.Linear(4, 4)
        self.first, self.second, self.again = shared, torch.nn.Tanh(), shared  # one module twice: once

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.children():
            x = block(x)
        names = [name for name, _ in self.named_children()]
        return x * len(names)


def test_children_and_named_children_are_the_submodules_once_each() -> None:
    compiles_whole(Stage(), torch.randn(3, 4))


def test_dict_update_with_tensors() -> None:
    """transformers 4's Falcon: `cache_kwargs.update({"sin": sin, "cos": cos})`."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        kwargs = {"position": 1}
        kwargs.update({"sin": x.sin(), "cos": x.cos()})
        kwargs.update(tan=x.tan())
        return kwargs["sin"] + kwargs["cos"] * kwargs["tan"] + kwargs["position"]

    compiles_whole(fn, torch.randn(5))


# -- an assignment after a view made for one expression: transformers 4's padded causal mask -----------
def padded_mask(mask: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
    mask = mask.clone()
    length = attention.shape[-1]
    padding = (mask[:, :length] + attention) == 0  # a view of mask, dropped once the sum is made
    mask[:, :length] = mask[:, :length].masked_fill(padding, -1e9)
    return mask


def test_a_view_nothing_refers_to_any_more_does_not_block_an_assignment() -> None:
    mask, attention = torch.randn(4, 6), torch.randint(0, 2, (4, 5)).float()
    mask[0, 0] = -attention[0, 0]  # a sum of 0: padded
    compiles_whole(padded_mask, mask, attention)
