"""fuse(graph): which nodes share a kernel, what is stored, and why."""

import pytest
import torch

from minicompiler.fuse import Alias, ExternCall, FuseError, Kernel, fuse
from minicompiler.ir import Graph, TensorMeta


def placeholders(g, *shapes):
    return [g.placeholder(f"x{i}", TensorMeta(shape, torch.float32)) for i, shape in enumerate(shapes)]


def softmax(g, x):
    exps = g.call("exp", g.call("sub", x, g.call("amax", x, (1,), True)))
    return g.call("div", exps, g.call("sum", exps, (1,), True))


def reasons(schedule, fused=False):
    return [d.reason for d in schedule.decisions if d.fused == fused]


def test_cos_cos_is_one_kernel_storing_only_its_output():
    g = Graph()
    (x,) = placeholders(g, (1024,))
    g.output(g.call("cos", cos := g.call("cos", x)))
    schedule = fuse(g)
    [kernel] = schedule.steps
    assert (kernel.name, kernel.kind, kernel.domain) == ("kernel_cos_cos", "pointwise", (1024,))
    assert cos not in schedule.buffers  # lives in a register
    assert [b.name for b in kernel.outputs] == ["cos_0"] and [b.name for b in kernel.inputs] == ["x0"]
    assert reasons(schedule, fused=True) == ["same iteration space [1024]"]


def test_softmax_is_one_reduction_kernel():
    g = Graph()
    (x,) = placeholders(g, (64, 1000))
    g.output(softmax(g, x))
    [kernel] = fuse(g).steps
    assert kernel.name == "kernel_amax_sub_exp_sum_div"
    assert (kernel.kind, kernel.domain, kernel.reduction_dims) == ("reduction", (64, 1000), (1,))


def test_layer_norm_is_one_kernel():
    g = Graph()
    x, weight, bias = placeholders(g, (8, 32), (32,), (32,))
    centered = g.call("sub", x, g.call("div", g.call("sum", x, (1,), True), 32))
    variance = g.call("div", g.call("sum", g.call("mul", centered, centered), (1,), True), 32)
    normed = g.call("mul", centered, g.call("rsqrt", g.call("add", variance, 1e-5)))
    g.output(g.call("add", g.call("mul", normed, weight), bias))
    schedule = fuse(g)
    [kernel] = schedule.steps
    assert len(kernel.nodes) == 11 and kernel.name == "kernel_sum_div_sub_mul_sum_etc"
    assert {b.name for b in kernel.inputs} == {"x0", "x1", "x2"}


def test_matmul_epilogue_is_an_extern_then_one_kernel():
    g = Graph()
    x, w, b = placeholders(g, (16, 8), (8, 4), (4,))
    g.output(g.call("maximum", g.call("add", g.call("matmul", x, w), b), 0.0))
    schedule = fuse(g)
    extern, kernel = schedule.steps
    assert isinstance(extern, ExternCall) and isinstance(kernel, Kernel)
    assert [n.op for n in kernel.nodes] == ["add", "maximum"]
    assert "matmul is an extern call" in reasons(schedule)
    assert schedule.buffers[extern.node].origin == "extern"


def test_different_iteration_space_starts_a_new_kernel_and_stores_the_producer():
    g = Graph()
    x, y = placeholders(g, (1024,), (4, 1024))
    cos = g.call("cos", x)
    g.output(g.call("add", cos, y))
    schedule = fuse(g)
    assert len(schedule.kernels) == 2
    assert "different iteration space: [4, 1024] vs [1024]" in reasons(schedule)
    assert schedule.buffers[cos].reasons == ("read by kernel_add",)


def test_reduction_over_other_dims_is_refused():
    g = Graph()
    (x,) = placeholders(g, (8, 16))
    cos = g.call("cos", x)
    g.output((g.call("sum", cos, (1,), True), g.call("sum", cos, (0,), True)))
    schedule = fuse(g)
    assert len(schedule.kernels) == 2
    assert "reduction over different dims: (0,) vs (1,)" in reasons(schedule)


def test_an_element_value_read_only_by_reductions_over_other_dims_is_computed_in_their_kernel():
    """x centred by its columns' means, then summed along each row (as seed 001's numpy_fn does):
    the centred values are computed in the row sums' kernel. In the column kernel, which could
    compute them too, they were stored for the row sums to read back."""
    g = Graph()
    (x,) = placeholders(g, (64, 32))
    centred = g.call("sub", x, g.call("div", g.call("sum", x, (0,), True), 64))
    g.output((g.call("sum", centred, (1,), False), g.call("sum", g.call("mul", centred, centred), (1,), False)))
    schedule = fuse(g)
    columns, rows = schedule.kernels
    assert columns.reduction_dims == (0,) and rows.reduction_dims == (1,) and centred in rows.nodes
    assert centred not in schedule.buffers
    assert any("read only by reductions over other dims than (0,)" in r for r in reasons(schedule))
    # a softmax's result, summed over columns, stays in the softmax's kernel: it is computed from
    # exp(x - max), which that kernel would then store instead (the same bytes)
    g = Graph()
    (x,) = placeholders(g, (64, 32))
    g.output(g.call("sum", probabilities := softmax(g, x), (0,), False))
    first, _ = fuse(g).kernels
    assert probabilities in first.nodes


def test_row_value_that_does_not_broadcast_per_row_is_refused():
    g = Graph()
    (x,) = placeholders(g, (4, 4))
    total = g.call("sum", x, (1,), False)  # [4]: broadcast against [4, 4] it runs along dim 1
    g.output(g.call("add", x, total))
    schedule = fuse(g)
    assert len(schedule.kernels) == 2
    assert any("does not broadcast along the reduced dims" in r for r in reasons(schedule))


def test_branches_that_meet_again_are_merged_into_one_kernel():
    g = Graph()
    x, y = placeholders(g, (100, 100), (100, 100))  # large: small ones reading inputs join anyway
    g.output(g.call("add", g.call("cos", x), g.call("sin", y)))
    schedule = fuse(g)
    assert len(schedule.kernels) == 1
    assert "merged its kernel: same iteration space" in reasons(schedule, fused=True)


def test_merge_is_refused_when_a_step_in_between_needs_the_values():
    g = Graph()
    x, y, w = placeholders(g, (100, 100), (100, 100), (100, 100))
    cos = g.call("cos", x)
    mm = g.call("matmul", cos, w)
    g.output((g.call("add", cos, g.call("sin", y)), mm))
    schedule = fuse(g)
    assert len(schedule.kernels) == 2
    assert any("cos is needed by matmul in between" in r for r in reasons(schedule))


def test_a_kernel_cannot_absorb_a_node_reading_a_later_step():
    g = Graph()
    x, w = placeholders(g, (10, 10), (10, 10))
    cos = g.call("cos", x)
    g.output(g.call("add", cos, g.call("matmul", cos, w)))
    schedule = fuse(g)
    assert [type(s).__name__ for s in schedule.steps] == ["Kernel", "ExternCall", "Kernel"]
    assert "reads matmul, computed after the kernel holding cos" in reasons(schedule)


def test_independent_reductions_of_one_input_share_a_kernel():
    g = Graph()
    (x,) = placeholders(g, (8, 16))
    g.output((g.call("sum", x, (1,), True), g.call("sum", g.call("mul", x, x), (1,), True)))
    schedule = fuse(g)
    assert len(schedule.kernels) == 1
    assert "shares input x0 with the kernel holding sum" in reasons(schedule, fused=True)


def test_views_alias_stored_buffers_and_say_why():
    g = Graph()
    (x,) = placeholders(g, (6, 4))
    cos = g.call("cos", x)
    flipped = g.call("permute", cos, (1, 0))
    g.output((g.call("exp", flipped), g.call("reshape", flipped, (24,)), g.call("reshape", x, (4, 6))))
    schedule = fuse(g)
    kinds = [type(s).__name__ for s in schedule.steps]
    assert kinds == ["Kernel", "Alias", "Kernel", "ExternCall", "Alias"]
    assert schedule.buffers[cos].reasons == ("viewed by permute",)
    copy = schedule.steps[3]
    assert "cannot be a view" in copy.reason
    assert "permute is a view: it aliases a stored buffer" in reasons(schedule)
    assert isinstance(schedule.steps[4], Alias)


def test_constants_are_inlined_unless_an_output():
    g = Graph()
    (x,) = placeholders(g, (3,))
    two = g.call("full", (3,), 2.0, torch.float32)
    three = g.call("full", (), 3.0, torch.float32)
    g.output((g.call("mul", x, two), g.call("add", x, three), three))
    schedule = fuse(g)
    assert two not in schedule.buffers and three in schedule.buffers
    assert all(b.node.op != "full" for k in schedule.kernels for b in k.inputs)


def test_kernel_names_are_unique():
    g = Graph()
    x, y = placeholders(g, (3,), (4,))
    g.output((g.call("cos", x), g.call("cos", y)))
    assert [k.name for k in fuse(g).kernels] == ["kernel_cos", "kernel_cos_1"]


def test_composite_ops_must_be_decomposed_first():
    g = Graph()
    (x,) = placeholders(g, (3,))
    g.output(g.call("relu", x))
    with pytest.raises(FuseError, match="relu is not a primitive op; run decompose first"):
        fuse(g)


def test_fuse_leaves_the_graph_alone_and_prints_its_decisions():
    g = Graph()
    (x,) = placeholders(g, (4, 5))
    g.output(softmax(g, x))
    before = str(g)
    schedule = fuse(g)
    assert str(g) == before
    text = str(schedule)
    assert "kernel_amax_sub_exp_sum_div: reduction over [4, 5] reducing dims (1,)" in text
    assert "amax -> sub: fused: one value per row" not in text  # sub is an element value
    assert "amax -> sub: fused: same iteration space [4, 5]" in text


def test_a_per_channel_value_scheduled_late_moves_before_the_kernel_that_needs_it():
    """BatchNorm's backward recomputes (x - mean) * rsqrt(var + eps) * weight: the per-channel
    rsqrt and the weight's reshape come after the kernel holding x - mean; they move before it,
    and the whole element-wise chain is one kernel, whose results still match the interpreter."""
    from minicompiler.codegen import generate
    from minicompiler.ir import run_graph

    g = Graph()
    x, mean, var, weight = placeholders(g, (4, 8, 5, 5), (8,), (8,), (8,))
    per_channel = (1, 8, 1, 1)
    centred = g.call("sub", x, g.call("reshape", mean, per_channel))
    scale = g.call("rsqrt", g.call("add", g.call("reshape", var, per_channel), 1e-5))
    y = g.call("mul", g.call("mul", centred, scale), g.call("reshape", weight, per_channel))
    g.output(g.call("maximum", y, 0.0))
    schedule = fuse(g)
    big = [k for k in schedule.kernels if k.domain == (4, 8, 5, 5)]
    assert len(big) == 1 and [n.op for n in big[0].nodes] == ["sub", "mul", "mul", "maximum"]
    inputs = [torch.randn(4, 8, 5, 5), torch.randn(8), torch.rand(8), torch.randn(8)]
    torch.testing.assert_close(generate(schedule, "cpp")(inputs), run_graph(g, *inputs))


def batch_norm_train(g, x, weight, eps=1e-5):
    """BatchNorm2d's training forward as the decomposition writes it: per-channel statistics
    as [C] values, reshaped to [1, C, 1, 1] to meet the activations, plus a detached mean for
    the running statistics."""
    per_channel = (1, x.meta.shape[1], 1, 1)
    n = x.meta.numel // x.meta.shape[1]
    mean = g.call("div", g.call("sum", x, (0, 2, 3), False), n)
    centred = g.call("sub", x, g.call("reshape", mean, per_channel))
    var = g.call("div", g.call("sum", g.call("mul", centred, centred), (0, 2, 3), True), n)
    normed = g.call("mul", centred, g.call("rsqrt", g.call("add", var, eps)))
    y = g.call("maximum", g.call("mul", normed, g.call("reshape", weight, per_channel)), 0.0)
    return y, g.call("mul", g.call("detach", mean), 0.1)


def test_views_that_rename_a_row_value_join_its_kernel():
    """[C] <-> [1, C, 1, 1] and detach are the same register in a loop over channels: BatchNorm's
    statistics, normalization, ReLU and running-mean update are one kernel."""
    g = Graph()
    x, weight = placeholders(g, (4, 8, 5, 5), (8,))
    g.output(batch_norm_train(g, x, weight))
    schedule = fuse(g)
    [kernel] = schedule.kernels
    assert kernel.name == "kernel_sum_div_sub_mul_sum_etc"  # views are not in kernel names
    assert {n.op for n in kernel.nodes} >= {"reshape", "detach"}
    assert "reshape renames div: the same register in the loop nest" in reasons(schedule, fused=True)
    assert [type(s).__name__ for s in schedule.steps] == ["Alias", "Kernel"]  # the weight's reshape


def test_a_row_value_expanded_over_the_domain_joins_but_moving_views_do_not():
    g = Graph()
    x, y = placeholders(g, (6, 4), (4, 6))
    total = g.call("sum", x, (1,), True)  # [6, 1]: one value per row
    spread = g.call("expand", total, (6, 4))
    flipped = g.call("permute", g.call("reshape", total, (6,)), (0,))
    g.output((g.call("mul", x, spread), g.call("add", flipped, 1.0), g.call("sum", y, (1,), True)))
    schedule = fuse(g)
    assert "expand renames sum: the same register in the loop nest" in reasons(schedule, fused=True)
    assert any("permute moves elements" in r for r in reasons(schedule))


def test_an_element_view_the_output_reads_stays_an_alias_and_a_row_view_is_stored():
    g = Graph()
    (x,) = placeholders(g, (6, 4))
    mean = g.call("div", g.call("sum", x, (1,), False), 4)
    centred = g.call("sub", x, g.call("reshape", mean, (6, 1)))
    g.output((g.call("cos", centred), g.call("detach", centred), g.call("detach", mean)))
    schedule = fuse(g)
    assert [type(s).__name__ for s in schedule.steps] == ["Kernel", "Alias"]
    assert "output reads it from memory" in reasons(schedule)[-1]
    [kernel] = schedule.kernels
    assert kernel.nodes[-1].op == "detach" and kernel.outputs[-1].node is kernel.nodes[-1]


def test_small_kernels_reading_only_inputs_run_as_one():
    """Counters a batch norm keeps (`num_batches_tracked + 1`), one per layer, read only the
    graph's inputs: they wait on nothing and join one kernel, wherever they sit in the graph.
    A large one stays where it is, free to fuse with what reads it."""
    g = Graph()
    x, z, c0, c1 = placeholders(g, (4096 * 4,), (4096 * 4,), (1,), (1,))
    first = g.call("add", c0, 1.0)
    middle = g.call("exp", g.call("sin", x))
    second = g.call("add", c1, 1.0)
    big = g.call("cos", z)
    g.output((first, middle, second, big))
    kernels = [s for s in fuse(g).steps if isinstance(s, Kernel)]
    assert [k.name for k in kernels] == ["kernel_add_add", "kernel_sin_exp", "kernel_cos"]
    assert "reads only the graph's inputs" in " ".join(reasons(fuse(g), fused=True))


def test_a_view_only_stored_of_a_value_the_kernel_stores_is_an_alias_of_it():
    """A batch norm's mean is an output as (C,) and, reshaped to (C, 1), read by another kernel:
    the kernel stores it once, and the reshape is an alias of that buffer, not a second store.
    A view the kernel itself reads stays in it."""
    g = Graph()
    x, z = placeholders(g, (6, 4), (5, 6, 1))
    mean = g.call("div", g.call("sum", x, (1,), False), 4)
    column = g.call("reshape", mean, (6, 1))
    inside = g.call("reshape", mean, (6, 1))  # (CSE would merge the two reshapes)
    g.output((mean, g.call("sub", x, inside), g.call("mul", z, column)))
    schedule = fuse(g)
    first, second = schedule.kernels
    assert [b.node for b in first.outputs] == [mean, schedule.graph.output_nodes()[1]]
    assert isinstance(schedule.steps[1], Alias) and schedule.steps[1].node is column
    assert inside in first.nodes and column in [b.node for b in second.inputs]
