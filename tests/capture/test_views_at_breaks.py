"""Graph breaks while views are alive: the resumed code gets views that share memory with their
bases, as in eager, so a change made through one after the break shows in the other.

Each program is run eagerly and compiled on the same fresh inputs (cloned); the results, the
inputs after the call (changed in place or not) and the number of breaks are compared.
"""

from __future__ import annotations

import pytest
import torch

import minicompiler

from .conftest import assert_same


def compare(fn, make_args, breaks: int, calls: int = 3, reports: int | None = 1, **options):
    """Eager and compiled `fn` agree on outputs and on what they did to their inputs; the first
    call's report has `breaks` graph breaks and no eager fallback; `reports` compilations in all."""
    compiled = minicompiler.compile(fn, backend="eager", **options)
    for _ in range(calls):
        args = make_args()
        mine = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        expected, got = fn(*args), compiled(*mine)
        assert_same(got, expected)
        assert_same(mine, args)  # inputs changed in place alike
    report = compiled.reports[0]
    assert report.eager_fallback is None, report.eager_fallback
    assert len(report.graph_breaks) == breaks, [b.reason for b in report.graph_breaks]
    assert reports is None or len(compiled.reports) == reports  # 1: later calls reuse every segment
    return compiled


def view_alive_across_print(x):
    y = torch.sin(x) * 2
    rows = y.view(2, -1)  # a view of a tensor the graph computed
    print("between")
    return rows.cos() + y.sum()


def test_a_view_alive_across_a_print_costs_one_break(capsys) -> None:
    compare(view_alive_across_print, lambda: (torch.randn(8),), breaks=1)
    assert capsys.readouterr().out.count("between") == 6


def view_mutated_after_print(x):
    y = x * 2
    row = y.view(2, -1)[1]
    print("between")
    row.mul_(10)  # in eager this changes y too
    return y + 1, row


def test_a_view_changed_after_the_break_changes_its_base() -> None:
    # print is one break; an in-place op on a view is one too (capture does not functionalize
    # writes through views): it runs for real, on a view rebuilt from y's real memory
    compare(view_mutated_after_print, lambda: (torch.randn(8),), breaks=2)


def base_mutated_by_the_breaking_instruction(x):
    y = x * 2
    first = y[0]
    y.add_(1)  # in place while a view is alive: this instruction is the break and runs for real
    return first + y.sum()


def test_the_breaking_instruction_writes_through_the_base() -> None:
    compare(base_mutated_by_the_breaking_instruction, lambda: (torch.randn(3),), breaks=1)


def view_of_an_input(x):
    tail = x[1:]
    print("between")
    tail.add_(1)  # writes into the caller's x
    return x * 2, tail.sum()


def test_a_view_of_an_input_writes_into_the_input() -> None:
    compare(view_of_an_input, lambda: (torch.randn(5),), breaks=2)


def view_of_a_changed_input(x):
    x.mul_(3)  # the graph changes the input, then takes a view of its new value
    head = x[:2].t()
    print("between")
    head.sub_(1)
    return x + 0


def test_a_view_of_an_input_the_graph_changed() -> None:
    compare(view_of_a_changed_input, lambda: (torch.randn(4, 3),), breaks=2)


def views_chained_with_sizes(x):
    b = x.shape[0]
    flat = (x + 1).reshape(b, -1)
    cols = flat.unsqueeze(0).transpose(1, 2)[0]  # (C, B): several view ops
    print("between")
    cols.zero_()
    return flat.sum(1), cols.shape[1]


@pytest.mark.parametrize("dynamic", [False, True])
def test_views_made_by_several_ops_and_symbolic_sizes(dynamic: bool) -> None:
    sizes = iter([3, 5, 7])
    compare(views_chained_with_sizes, lambda: (torch.randn(next(sizes), 2, 2),), breaks=2,
            dynamic=dynamic, reports=None)  # new sizes compile again (also without views)


def views_on_both_sides(x):
    y = x.exp()
    a, b = y[0], y[1]
    print("between")
    both = a + b  # the resumed graph reads both views (inputs sharing memory)
    a.fill_(0)  # and a write through one of them is a break again, on real memory
    return both, y, b


def test_a_resumed_graph_reads_views_that_share_memory() -> None:
    compare(views_on_both_sides, lambda: (torch.randn(2, 3),), breaks=2)


def view_with_gradient(w):
    h = w * 3
    top = h[:2]
    print("between")
    return (top * h[2:]).sum()


def test_a_view_alive_at_a_break_keeps_its_gradient() -> None:
    compiled = minicompiler.compile(view_with_gradient, backend="eager")
    w1 = torch.randn(4, 2, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_()
    view_with_gradient(w1).backward()
    compiled(w2).backward()
    torch.testing.assert_close(w2.grad, w1.grad)
    assert len(compiled.reports[0].graph_breaks) == 1 and compiled.reports[0].eager_fallback is None
