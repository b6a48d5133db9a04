"""Python features inside captured functions: they run at capture time, tensors go to the graph."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from minicompiler.capture import capture

W = torch.randn(16, 16)
SCALE = 0.5


def helper(x: torch.Tensor, power: int = 2) -> torch.Tensor:
    return x**power + 1


def test_inlined_helper_with_default_and_keyword(check) -> None:
    result = check(lambda x: helper(x) + helper(x, power=3), lambda: (torch.randn(4, 16),))
    assert [n.source.function for n in result.graph.compute_nodes()][:2] == ["helper", "helper"]


def test_global_tensor_and_constant(check) -> None:
    def fn(x):
        return (x @ W) * SCALE

    result = check(fn, lambda: (torch.randn(4, 16),))
    assert [str(s) for s in result.input_sources] == ["args[0]", "globals()['W']"]
    assert any(g.description == "globals()['SCALE'] == 0.5" for g in result.guards)


def test_closure_over_tensor_and_number() -> None:
    bias, k = torch.randn(8), 3

    def fn(x):
        return x * k + bias

    x = torch.randn(8)
    result = capture(fn, (x,), {})
    assert [s.label for s in result.input_sources] == ["x", "bias"]
    from minicompiler.ir import run_graph

    torch.testing.assert_close(run_graph(result.graph, *result.fetch_inputs((x,), {})), fn(x))


def test_nested_function_and_closure_made_inside(check) -> None:
    def fn(x):
        scale = x.shape[-1] ** -0.5

        def attend(q):
            return torch.softmax(q * scale, dim=-1)

        return attend(x) + attend(x * 2)

    check(fn, lambda: (torch.randn(3, 8),))


def test_loops_comprehensions_and_builtins(check) -> None:
    def fn(x, ys):
        parts = [torch.relu(y) for y in ys]
        total = sum(parts)
        for i, p in enumerate(parts):
            total = total + p * (i + 1)
        widths = {name: t.shape[0] for name, t in zip(("a", "b"), ys, strict=True)}
        n = 0
        while n < 3:
            n += 1
            x = x * 2
        return torch.cat([total, x], dim=0), widths, max(len(ys), 1), math.sqrt(16)

    check(fn, lambda: (torch.randn(2, 4), [torch.randn(2, 4), torch.randn(2, 4)]))


def test_args_kwargs_star_and_dict_outputs(check) -> None:
    def fn(*xs, scale=2.0):
        shape = (xs[0].shape[0], -1)
        out = {"sum": xs[0] + xs[1], "flat": xs[0].reshape(*shape)}
        out["scaled"] = torch.stack(xs, dim=0) * scale
        a, *rest = xs
        return out, len(rest)

    check(fn, lambda: (torch.randn(2, 3, 4), torch.randn(2, 3, 4)))


def test_keyword_arguments_reach_the_graph() -> None:
    def fn(x, *, mask=None):
        return x if mask is None else x.masked_fill(mask, 0.0)

    x, mask = torch.randn(4), torch.tensor([True, False, True, False])
    result = capture(fn, (x,), {"mask": mask})
    assert [str(s) for s in result.input_sources] == ["args[0]", "kwargs['mask']"]
    from minicompiler.ir import run_graph

    torch.testing.assert_close(run_graph(result.graph, *result.fetch_inputs((x,), {"mask": mask})),
                               fn(x, mask=mask))


def test_if_on_python_values_and_none_checks(check) -> None:
    class Gated(nn.Module):
        def __init__(self, use_bias: bool) -> None:
            super().__init__()
            self.bias = nn.Parameter(torch.randn(4)) if use_bias else None
            self.mode = "gelu"

        def forward(self, x):
            if self.bias is not None:
                x = x + self.bias
            if self.mode == "gelu" and x.ndim == 2:
                x = F.gelu(x)
            elif self.training:
                x = x * 0
            return x if x.shape[0] > 1 else -x

    for use_bias in (True, False):
        result = check(Gated(use_bias).eval(), lambda: (torch.randn(3, 4),))
        assert ("add" in [n.op for n in result.graph.compute_nodes()]) == use_bias


def test_in_place_ops_on_fresh_tensors(check) -> None:
    def fn(x):
        y = x * 2
        y += 1
        y.mul_(3)
        z = torch.zeros_like(x)
        z.add_(y).relu_()
        return y, z

    result = check(fn, lambda: (torch.randn(5),))
    assert "add" in [n.op for n in result.graph.compute_nodes()]


def test_indexing(check) -> None:
    def fn(x):
        return x[0], x[:, 1:3], x[..., None, -1], x[1:, ::2, None], x[-1, ..., 2], x[0].T, x.mT

    check(fn, lambda: (torch.randn(4, 5, 6),))


def test_views_and_shapes(check) -> None:
    def fn(x):
        b, c, h, w = x.shape
        y = x.permute(0, 2, 3, 1).reshape(b, h * w, c)
        z = x.flatten(2).transpose(1, 2).unsqueeze(1).squeeze(1)
        parts = x.chunk(2, dim=1)
        first, second = torch.split(x, [1, c - 1], dim=1)
        return y + z, parts[0] * parts[1], first.expand(-1, c - 1, -1, -1) + second, x.size(1), x.dim()

    check(fn, lambda: (torch.randn(2, 4, 3, 5),))


def test_reductions_and_casts(check) -> None:
    def fn(x):
        return (
            x.sum(), x.sum(dim=(-1, 0)), torch.mean(x, dim=1, keepdim=True), x.amax(-1), x.var(1),
            torch.std(x, dim=0, correction=0), x.max(dim=1).values, x.max(),
            x.float().half().to(torch.float32),
            x.to(x.dtype), F.log_softmax(x, dim=0), torch.clamp(x, min=-0.5), torch.where(x > 0, x, 0.0),
        )

    check(fn, lambda: (torch.randn(3, 4),), atol=1e-3, rtol=1e-3)


def test_operators_with_scalars_on_either_side(check) -> None:
    def fn(x):
        return 2 - x, 1 / (x.abs() + 1), 2**x, -x, x // 1, x % 2, 1 < x, (x > 0) & (x < 1), abs(x), ~(x > 0)

    check(fn, lambda: (torch.randn(8),))


def test_unknown_torch_function_becomes_extern_call(check) -> None:
    result = check(lambda x: torch.argsort(x, dim=0) + x.argsort(0), lambda: (torch.randn(6),))
    assert [n.op for n in result.graph.compute_nodes()] == ["torch_call", "torch_call", "add"]


def test_factories_and_constants(check) -> None:
    def fn(x):
        return x + torch.ones(x.shape[-1]) + torch.full((1,), 2.0) + torch.arange(x.shape[-1])

    check(fn, lambda: (torch.randn(2, 3),))


def test_same_tensor_passed_twice_is_one_input() -> None:
    x = torch.randn(3)
    result = capture(lambda a, b: a * b, (x, x), {})
    assert len(result.graph.inputs) == 1
    assert not all(g.check((x, torch.randn(3)), {}) for g in result.guards)


@pytest.mark.parametrize("fn", [torch.cos, nn.Linear(4, 2), F.relu])
def test_callables_that_are_not_python_functions(check, fn) -> None:
    check(fn, lambda: (torch.randn(3, 4),))


def test_bound_method(check) -> None:
    class Scaler:
        def __init__(self) -> None:
            self.factor = 3.0
            self.offset = torch.randn(4)

        def apply(self, x):
            return x * self.factor + self.offset

    result = check(Scaler().apply, lambda: (torch.randn(4),))
    assert [str(s) for s in result.input_sources] == ["args[0]", "self.offset"]


def test_tensor_methods_without_a_torch_twin_and_more_in_place(check) -> None:
    def fn(x):
        y = x.repeat(2, 1) + x.new_zeros(2 * x.shape[0], x.shape[1])
        z = torch.empty_like(x)
        z.copy_(x[0])
        z.mul_(2).fill_(1.5) if x.shape[0] > 100 else z.zero_().add_(x)
        return y, z

    check(fn, lambda: (torch.randn(3, 4),))


def test_tensor_methods_that_take_dims_as_separate_arguments(check) -> None:
    """x.flip(0) is torch.flip(x, (0,)): the method spells its tuple as separate arguments, which
    torch.flip(x, 0) rejects; captured with the method, not a graph break."""
    def fn(x):
        return x.flip(0) * 2, x.flip(0, 1) + 1, x.flip((1,)).sum(0)

    result = check(fn, lambda: (torch.randn(3, 4),))
    assert not result.resume


def test_tensor_methods_called_through_the_class(check) -> None:
    """torch.Tensor.__rsub__(x, 2) is x.__rsub__(2), which is 2 - x (Python's `2 - x`): the
    reflected operators, C ones (`__radd__`) and those torch writes in Python (`__rsub__`), and
    plain methods (`torch.Tensor.add`) are captured, not a graph break."""
    def fn(x, y):
        return (torch.Tensor.__rsub__(x, 2), torch.Tensor.__radd__(x, 1.5), torch.Tensor.__rdiv__(x, 3),
                torch.Tensor.__rpow__(x, 2.0), torch.Tensor.__rmod__(x, 1.5), torch.Tensor.__rmatmul__(x, y),
                torch.Tensor.add(x, y.sum()))

    result = check(fn, lambda: (torch.randn(4, 3), torch.randn(5, 4)))
    assert not result.resume


def test_requires_grad_of_a_tensor_made_inside(check) -> None:
    """A tensor made from no input that requires grad does not require grad: known at capture
    (torch.signal.windows reads it)."""
    def fn(x):
        k = torch.arange(4, dtype=x.dtype)
        return x * k if not k.requires_grad else x

    result = check(fn, lambda: (torch.randn(3, 4),))
    assert not result.resume
