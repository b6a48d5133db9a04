"""make_trainable / compile_training: compiled forward+backward pairs under torch autograd."""

import pytest
import torch

from minicompiler.autograd import compile_training, differentiate, make_trainable, partition
from minicompiler.ir import Graph, TensorMeta, run_graph

F64 = torch.float64


def run_with(graph: Graph):
    return lambda inputs: run_graph(graph, *inputs)


def trainable_for(graph: Graph, requires_grad: list[bool], strategy: str = "min_cut"):
    return compile_training(graph, requires_grad, run_with, strategy).run  # type: ignore[arg-type]


def softmax_graph() -> Graph:
    g = Graph()
    x = g.placeholder("x", TensorMeta((4, 7), F64))
    shifted = g.call("sub", x, g.call("amax", x, (1,), True))
    e = g.call("exp", shifted)
    g.output(g.call("div", e, g.call("sum", e, (1,), True)))
    return g


def attention_like_graph(device: str = "cpu") -> Graph:
    """matmul, permute, slice with a step, cat, pow, maximum and where in one graph."""
    g = Graph()
    q = g.placeholder("q", TensorMeta((2, 3, 4), F64, torch.device(device)))
    k = g.placeholder("k", TensorMeta((2, 5, 4), F64, torch.device(device)))
    bias = g.placeholder("bias", TensorMeta((5,), F64, torch.device(device)))
    scores = g.call("add", g.call("matmul", q, g.call("permute", k, (0, 2, 1))), bias)  # (2, 3, 5)
    picked = g.call("slice", scores, 2, 0, 5, 2)  # (2, 3, 3)
    joined = g.call("cat", [picked, g.call("pow", scores, 2)], 2)  # (2, 3, 8)
    clipped = g.call("maximum", joined, g.call("tanh", joined))
    g.output(g.call("where", g.call("gt", joined, 0.0), clipped, g.call("mul", joined, 0.1)))
    return g


@pytest.mark.parametrize("strategy", ["save_all", "min_cut"])
@pytest.mark.parametrize("build", [softmax_graph, attention_like_graph])
def test_gradcheck_through_make_trainable(build, strategy: str) -> None:
    torch.manual_seed(0)
    graph = build()
    run = trainable_for(graph, [True] * len(graph.inputs), strategy)
    inputs = tuple(torch.randn(p.meta.shape, dtype=F64, requires_grad=True) for p in graph.inputs)
    torch.testing.assert_close(run(list(inputs)), run_graph(graph, *inputs))
    assert torch.autograd.gradcheck(lambda *xs: run(list(xs)), inputs)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gradcheck_on_cuda() -> None:
    torch.manual_seed(0)
    graph = attention_like_graph("cuda")
    run = trainable_for(graph, [True] * len(graph.inputs), "min_cut")
    inputs = tuple(
        torch.randn(p.meta.shape, dtype=F64, device="cuda", requires_grad=True) for p in graph.inputs
    )
    assert torch.autograd.gradcheck(lambda *xs: run(list(xs)), inputs)


def mlp_graph(batch: int, d_in: int, hidden: int, d_out: int) -> Graph:
    """sum((relu(x @ w1.T + b1) @ w2.T + b2) ** 2), as nn.Linear lays out its weights."""
    g = Graph()
    x = g.placeholder("x", TensorMeta((batch, d_in), torch.float32))
    w1 = g.placeholder("w1", TensorMeta((hidden, d_in), torch.float32))
    b1 = g.placeholder("b1", TensorMeta((hidden,), torch.float32))
    w2 = g.placeholder("w2", TensorMeta((d_out, hidden), torch.float32))
    b2 = g.placeholder("b2", TensorMeta((d_out,), torch.float32))
    h = g.call("maximum", g.call("addmm", b1, x, g.call("permute", w1, (1, 0))), 0.0)
    y = g.call("addmm", b2, h, g.call("permute", w2, (1, 0)))
    g.output(g.call("sum", g.call("mul", y, y), (0, 1), False))
    return g


def test_mlp_trains_like_eager_for_three_sgd_steps() -> None:
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    params = [p.detach().clone().requires_grad_() for p in eager.parameters()]  # w1, b1, w2, b2
    run = trainable_for(mlp_graph(8, 6, 16, 3), [False, True, True, True, True])
    eager_opt = torch.optim.SGD(eager.parameters(), lr=0.01)
    opt = torch.optim.SGD(params, lr=0.01)
    for _ in range(3):
        x = torch.randn(8, 6)
        eager_loss = eager(x).pow(2).sum()
        loss = run([x, *params])
        torch.testing.assert_close(loss, eager_loss)
        for o, lo in ((eager_opt, eager_loss), (opt, loss)):
            o.zero_grad()
            lo.backward()
            o.step()
    for p, q in zip(params, eager.parameters(), strict=True):
        torch.testing.assert_close(p, q)


def test_output_structure_non_differentiable_outputs_and_inputs_without_grad() -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((3, 4), F64))
    scale = g.placeholder("scale", TensorMeta((4,), F64))
    y = g.call("mul", g.call("sin", x), scale)
    g.output({"y": y, "positive": g.call("gt", y, 0.0), "count": 2, "scale2": g.call("mul", scale, 2)})
    compiled = compile_training(g, [True, False], run_with)
    assert compiled.joint.differentiable == [True, False, False]  # scale2 depends on no input needing grad
    assert len(compiled.backward.outputs) == 1  # no gradient work for `scale`

    x_val = torch.randn(3, 4, dtype=F64, requires_grad=True)
    scale_val = torch.randn(4, dtype=F64)
    out = compiled.run([x_val, scale_val])
    assert out["count"] == 2 and not out["positive"].requires_grad and not out["scale2"].requires_grad
    out["y"].sum().backward()  # the gradient arrives expanded (stride 0): the runner gets it contiguous
    torch.testing.assert_close(x_val.grad, torch.cos(x_val.detach()) * scale_val.expand(3, 4))
    assert scale_val.grad is None


def test_input_needing_grad_that_was_compiled_without_it_is_an_error() -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((3,), F64))
    g.output(g.call("exp", x))
    run = trainable_for(g, [False])
    with pytest.raises(ValueError, match="requires grad"):
        run([torch.randn(3, dtype=F64, requires_grad=True)])
    with torch.no_grad():  # fine when no gradient is being recorded
        run([torch.randn(3, dtype=F64, requires_grad=True)])


def test_compile_training_compiles_both_graphs_and_double_backward_is_refused() -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((5,), F64))
    g.output(g.call("cos", g.call("cos", x)))
    compiled_graphs: list[Graph] = []

    def compile_graph(graph: Graph):
        compiled_graphs.append(graph)
        return run_with(graph)

    compiled = compile_training(g, [True], compile_graph, "min_cut")
    assert compiled_graphs == [compiled.forward, compiled.backward]
    assert [s.name for s in compiled.saved] == ["x"]
    x_val = torch.randn(5, dtype=F64, requires_grad=True)
    tangent = torch.ones(5, dtype=F64, requires_grad=True)
    (grad,) = torch.autograd.grad(compiled.run([x_val]), x_val, tangent, create_graph=True)
    with pytest.raises(RuntimeError, match="twice"):
        grad.sum().backward()


def test_make_trainable_with_explicit_runners() -> None:
    joint = differentiate(softmax_graph(), [True])
    forward, backward, saved = partition(joint, "save_all")
    calls: list[str] = []

    def forward_runner(inputs):
        calls.append("forward")
        return run_graph(forward, *inputs)

    def backward_runner(inputs):
        calls.append("backward")
        return run_graph(backward, *inputs)

    run = make_trainable(forward_runner, backward_runner, joint, saved)
    x = torch.randn(4, 7, dtype=F64, requires_grad=True)
    run([x]).sum().backward()
    assert calls == ["forward", "backward"]
    torch.testing.assert_close(x.grad, torch.zeros_like(x))  # softmax rows sum to 1: a constant


def test_a_tensor_passed_by_keyword_is_compiled_where_its_place_is_known() -> None:
    # Hugging Face's BERT passes its attention mask by keyword: `sdpa(q, k, v, attn_mask=mask)`;
    # Swin's mask needs a gradient. The call takes it in its place (position 3), where the rules give it one.
    import torch.nn.functional as F

    import minicompiler

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q * 2, k, v, attn_mask=mask).sin()

    q, k, v = (torch.randn(2, 4, 16, 8, requires_grad=True) for _ in range(3))
    for mask_needs_grad in (False, True):
        mask = torch.randn(2, 1, 16, 16, requires_grad=mask_needs_grad)
        wanted = (q, k, v, mask) if mask_needs_grad else (q, k, v)
        compiled = minicompiler.compile(attention)
        out = compiled(q, k, v, mask)
        grad = torch.randn_like(out)
        expected = attention(q, k, v, mask)
        torch.testing.assert_close(out, expected)
        for got, want in zip(torch.autograd.grad(out, wanted, grad), torch.autograd.grad(expected, wanted, grad),
                             strict=True):
            torch.testing.assert_close(got, want)
        [graph] = compiled.report.graphs
        assert graph.fallback is None, graph.fallback


def test_a_tensor_by_keyword_after_a_gap_trains_with_torch_ops() -> None:
    # per_sample_weights after max_norm, which the call leaves out: it stays a keyword, where the
    # rules give no gradient, so that graph trains with torch ops (and its gradients are torch's)
    import torch.nn.functional as F

    import minicompiler

    def bag(w: torch.Tensor, idx: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return F.embedding_bag(idx, w, offsets=offsets, mode="sum", per_sample_weights=weights).sin()

    w, weights = torch.randn(10, 4, requires_grad=True), torch.randn(8, requires_grad=True)
    idx, offsets = torch.randint(0, 10, (8,)), torch.tensor([0, 3])
    compiled = minicompiler.compile(bag)
    out, expected = compiled(w, idx, offsets, weights), bag(w, idx, offsets, weights)
    grad = torch.randn_like(out)
    for got, want in zip(torch.autograd.grad(out, (w, weights), grad),
                         torch.autograd.grad(expected, (w, weights), grad), strict=True):
        torch.testing.assert_close(got, want)
    assert "passed by keyword" in compiled.report.graphs[0].fallback


def test_an_input_compiled_without_its_gradient_refuses_one_that_requires_it() -> None:
    """The graph has no gradient for an input compiled as not requiring one: a call where it does
    require one is an error that names it, not a silently missing gradient (no_grad: no error)."""
    graph = attention_like_graph()
    run = trainable_for(graph, [True, False, True])
    q, k, bias = (torch.randn(p.meta.shape, dtype=F64) for p in graph.inputs)
    run([q.requires_grad_(), k, bias.requires_grad_()]).sum().backward()
    assert q.grad is not None and bias.grad is not None
    with pytest.raises(ValueError, match="input k requires grad, but this graph was compiled without"):
        run([q, k.requires_grad_(), bias])
    with torch.no_grad():
        torch.testing.assert_close(run([q, k, bias]), run_graph(graph, q, k, bias))
