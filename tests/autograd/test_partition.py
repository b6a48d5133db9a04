"""Partitioning the joint graph: what each strategy saves; the pair still computes eager's gradients."""

import itertools
import math
import random

import pytest
import torch
import torch.nn.functional as F

from minicompiler.autograd import differentiate, make_trainable, partition
from minicompiler.autograd.maxflow import min_cut
from minicompiler.ir import Graph, TensorMeta, run_graph, verify


def cos_cos() -> Graph:
    g = Graph()
    x = g.placeholder("x", TensorMeta((16,), torch.float32))
    g.output(g.call("cos", g.call("cos", x)))
    return g


def layer_norm_gelu(rows: int = 8, cols: int = 32) -> Graph:
    """gelu(layer_norm(x) * w + b) from primitives (erf form of gelu, biased variance)."""
    g = Graph()
    x = g.placeholder("x", TensorMeta((rows, cols), torch.float64))
    w = g.placeholder("w", TensorMeta((cols,), torch.float64))
    b = g.placeholder("b", TensorMeta((cols,), torch.float64))
    mean = g.call("div", g.call("sum", x, (1,), True), cols)
    centered = g.call("sub", x, mean)
    var = g.call("div", g.call("sum", g.call("mul", centered, centered), (1,), True), cols)
    normed = g.call("mul", centered, g.call("rsqrt", g.call("add", var, 1e-5)))
    h = g.call("add", g.call("mul", normed, w), b)
    cdf = g.call("add", g.call("erf", g.call("mul", h, 1 / math.sqrt(2))), 1)
    g.output(g.call("mul", g.call("mul", h, 0.5), cdf))
    return g


def run_with(graph: Graph):
    return lambda inputs: run_graph(graph, *inputs)


def test_cos_cos_min_cut_saves_only_the_input() -> None:
    joint = differentiate(cos_cos(), [True])
    _, _, saved_all = partition(joint, "save_all")
    _, _, saved_min = partition(joint, "min_cut")
    assert [s.name for s in saved_min] == ["x"]
    # Like eager: x for the inner cos, cos(x) for the outer one.
    assert len(saved_all) == 2 and saved_all[0].name == "x"
    assert saved_min[0].shape == (16,) and saved_min[0].nbytes == 16 * 4


def test_the_forward_reads_through_its_detaches_and_outputs_keep_them() -> None:
    """Nothing differentiates the forward again: a value computed from a detach reads what the
    detach reads (one buffer, not a copy beside the original); a detached output stays detached."""
    g = Graph()
    x = g.placeholder("x", TensorMeta((4, 6), torch.float64))
    mean = g.call("div", g.call("sum", x, (1,), True), 6)
    centred = g.call("sub", x, g.call("detach", mean))
    g.output((g.call("mul", centred, mean), g.call("detach", mean)))
    forward, _, _ = partition(differentiate(g, [True]), "min_cut")
    verify(forward, primitive_only=True)
    readers = [n for n in forward.compute_nodes() if n.op != "detach"]
    assert not any(i.op == "detach" for n in readers for i in n.inputs())
    assert forward.output_nodes()[1].op == "detach"
    inputs = (torch.randn(4, 6, dtype=torch.float64),)
    torch.testing.assert_close(run_graph(forward, *inputs)[:2], run_graph(g, *inputs))


@pytest.mark.parametrize("strategy", ["save_all", "min_cut"])
def test_partitioned_pair_computes_eager_gradients(strategy: str) -> None:
    torch.manual_seed(0)
    joint = differentiate(layer_norm_gelu(), [True, True, True])
    forward, backward, saved = partition(joint, strategy)
    for graph in (joint.graph, forward, backward):
        verify(graph, primitive_only=True)
    assert [p.name for p in backward.inputs][: len(saved)] == [s.name for s in saved]
    assert len(forward.outputs) == 1 + len(saved)

    x = torch.randn(8, 32, dtype=torch.float64, requires_grad=True)
    w = torch.randn(32, dtype=torch.float64, requires_grad=True)
    b = torch.randn(32, dtype=torch.float64, requires_grad=True)
    trainable = make_trainable(run_with(forward), run_with(backward), joint, saved)
    out = trainable([x, w, b])  # the graph's output structure: one tensor
    expected = F.gelu(F.layer_norm(x, (32,), w, b))
    torch.testing.assert_close(out, expected)
    tangent = torch.randn_like(out)
    torch.testing.assert_close(
        torch.autograd.grad(out, (x, w, b), tangent), torch.autograd.grad(expected, (x, w, b), tangent)
    )


def test_min_cut_saves_fewer_bytes_than_save_all_on_layer_norm_gelu() -> None:
    joint = differentiate(layer_norm_gelu(), [True, True, True])
    _, _, saved_all = partition(joint, "save_all")
    _, backward, saved_min = partition(joint, "min_cut")
    assert sum(s.nbytes for s in saved_min) < sum(s.nbytes for s in saved_all)
    # Reductions are never recomputed: the backward graph reads their saved results.
    assert not any(n.op in ("sum", "amax", "amin") and n.tags.get("backward_of") is None
                   for n in backward.compute_nodes())


def test_reductions_and_externs_are_saved_not_recomputed() -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((4, 6), torch.float32))
    w = g.placeholder("w", TensorMeta((6, 5), torch.float32))
    h = g.call("matmul", x, w)
    g.output(g.call("exp", g.call("sub", h, g.call("amax", h, (1,), True))))
    joint = differentiate(g, [True, True])
    _, backward, _ = partition(joint, "min_cut")
    forward_ops = {n.op for n in backward.compute_nodes() if "backward_of" not in n.tags}
    assert not forward_ops & {"matmul", "amax"}


def test_of_equal_cuts_the_one_recomputing_least_is_saved() -> None:
    # sin(x - mean) * x: the backward needs x and, to recompute x - mean, sum(x) or
    # mean = sum(x) / 6, 4 floats either way; saving the mean spares the backward the
    # division (a kernel launch of its own, as BatchNorm's backward showed)
    g = Graph()
    x = g.placeholder("x", TensorMeta((4, 6), torch.float32))
    mean = g.call("div", g.call("sum", x, (1,), True), 6)
    g.output(g.call("mul", g.call("sin", g.call("sub", x, mean)), x))
    joint = differentiate(g, [True])
    _, backward, saved = partition(joint, "min_cut")
    assert sorted(s.name for s in saved) == sorted([x.name, mean.name])
    assert "div" not in {n.op for n in backward.compute_nodes() if "backward_of" not in n.tags}


def test_unknown_strategy_is_rejected() -> None:
    with pytest.raises(ValueError, match="save_all"):
        partition(differentiate(cos_cos(), [True]), "fastest")  # type: ignore[arg-type]


def cut_value(capacities: dict, side: set) -> float:
    """The total capacity of the edges leaving `side`."""
    return sum(c for u, edges in capacities.items() for v, c in edges.items() if u in side and v not in side)


def test_min_cut_matches_brute_force_on_random_networks() -> None:
    rng = random.Random(0)
    for _ in range(20):
        inner = list(range(5))
        capacities: dict = {}
        for u, v in itertools.permutations(["s", *inner, "t"], 2):
            if u != "t" and v != "s" and rng.random() < 0.4:
                capacities.setdefault(u, {})[v] = rng.choice([1, 2, 5, 9, math.inf])

        subsets = (set(chosen) for r in range(len(inner) + 1) for chosen in itertools.combinations(inner, r))
        best = min(cut_value(capacities, {"s", *chosen}) for chosen in subsets)
        if best == math.inf:
            continue
        near_source = min_cut(capacities, "s", "t")
        near_sink = min_cut(capacities, "s", "t", nearest="sink")
        for side in (near_source, near_sink):
            assert "s" in side and "t" not in side
            assert cut_value(capacities, side) == best
        assert near_source <= near_sink  # the smallest and the largest source sides
