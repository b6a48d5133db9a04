"""The IR: building graphs, meta inference, printing as runnable Python, verifying, interpreting."""

import pytest
import torch

from minicompiler.ir import (
    OPS,
    Graph,
    GraphVerificationError,
    SourceLoc,
    TensorMeta,
    compile_printed,
    copy_graph,
    rewrite,
    run_graph,
    verify,
)


def small_graph() -> Graph:
    g = Graph()
    x = g.placeholder("x", TensorMeta((4, 3), torch.float32))
    b = g.placeholder("b", TensorMeta((3,), torch.float16))
    with g.provenance(SourceLoc("user.py", 7, "y = torch.cos(x) + b")):
        y = g.call("add", g.call("cos", x), b)
    s = g.call("sum", y, (1,), True)
    g.output((s, {"t": g.call("permute", y, (1, 0))}, 2.5))
    return g


def test_meta_follows_torch_promotion_and_broadcasting():
    g = Graph()
    a = g.placeholder("a", TensorMeta((5, 1, 3), torch.int32))
    b = g.placeholder("b", TensorMeta((4, 1), torch.float16))
    c = g.placeholder("c", TensorMeta((), torch.float64))  # 0-d tensors do not promote dimensions
    out = g.call("mul", g.call("add", a, b), c)
    expected = (torch.ones(5, 1, 3, dtype=torch.int32) + torch.ones(4, 1, dtype=torch.float16)) * torch.ones(
        (), dtype=torch.float64
    )
    assert out.meta.shape == tuple(expected.shape)
    assert out.meta.dtype == expected.dtype == torch.float16
    assert g.call("div", a, 2).meta.dtype == torch.float32  # true division of ints gives float
    assert g.call("sum", a, (0, 2), False).meta.shape == (1,)


def test_view_meta_keeps_strides_and_compute_is_contiguous():
    g = Graph()
    x = g.placeholder("x", TensorMeta((2, 3), torch.float32))
    t = g.call("permute", x, (1, 0))
    assert t.meta.stride() == (1, 3)
    assert g.call("exp", t).meta.stride() == (2, 1)


def test_interpreter_matches_eager():
    g = small_graph()
    x, b = torch.randn(4, 3), torch.randn(3).half()
    s, d, c = run_graph(g, x, b)
    y = torch.cos(x) + b
    torch.testing.assert_close(s, y.sum(1, keepdim=True))
    torch.testing.assert_close(d["t"], y.t())
    assert c == 2.5


def test_printed_graph_is_runnable_python_and_carries_provenance():
    g = small_graph()
    text = str(g)
    assert "def forward(x: \"float32[4, 3]\", b: \"float16[3]\"):" in text
    assert "user.py:7  y = torch.cos(x) + b" in text
    x, b = torch.randn(4, 3), torch.randn(3).half()
    printed = compile_printed(g)(x, b)
    torch.testing.assert_close(printed[0], run_graph(g, x, b)[0])


def test_rewrite_copies_provenance_and_tags():
    g = small_graph()
    g.nodes[2].tags["origin"] = "test"

    def cos_to_sin(graph, node, args, kwargs):
        return graph.call("sin", *args) if node.op == "cos" else None

    new = rewrite(g, cos_to_sin)
    sin = next(n for n in new.nodes if n.op == "sin")
    assert sin.source == SourceLoc("user.py", 7, "y = torch.cos(x) + b")
    x, b = torch.randn(4, 3), torch.randn(3).half()
    torch.testing.assert_close(run_graph(new, x, b)[0], (torch.sin(x) + b).sum(1, keepdim=True))
    assert str(copy_graph(g)) == str(g)


def test_verifier_rejects_broken_graphs():
    g = small_graph()
    verify(g)
    with pytest.raises(GraphVerificationError, match="not a primitive"):
        bad = Graph()
        x = bad.placeholder("x", TensorMeta((3,), torch.float32))
        bad.output(bad.call("relu", x))
        verify(bad, primitive_only=True)
    g.nodes[2], g.nodes[3] = g.nodes[3], g.nodes[2]  # use before definition
    with pytest.raises(GraphVerificationError, match="before it is defined"):
        verify(g)
    g = small_graph()
    g.nodes[3].meta = TensorMeta((9,), torch.float32)
    with pytest.raises(GraphVerificationError, match="infers"):
        verify(g)


def test_every_op_has_a_kind_and_an_impl():
    for name, op in OPS.items():
        assert op.kind in ("pointwise", "reduction", "scan", "scatter", "view", "extern", "composite"), name
        assert callable(op.impl), name


def test_unknown_op_is_a_clear_error():
    g = Graph()
    x = g.placeholder("x", TensorMeta((3,), torch.float32))
    with pytest.raises(KeyError, match="unknown op 'frobnicate'"):
        g.call("frobnicate", x)


@pytest.mark.parametrize("device", ["cuda", "meta"])
def test_factories_live_where_they_are_told(device: str) -> None:
    """iota and full take their device by position: a result on the CPU would make `iota + x` of a
    CUDA x look like a move between devices (a graph break on every Hugging Face model on the GPU)."""
    g = Graph()
    x = g.placeholder("x", TensorMeta((3, 1), torch.float32, torch.device(device)))
    along = g.call("iota", (3, 1), 0, torch.int64, torch.device(device))
    filled = g.call("full", (1, 2), 1.5, torch.float32, device=torch.device(device))
    assert along.meta.device.type == filled.meta.device.type == device
    assert g.call("add", along, x).meta.device.type == device
    assert g.call("torch_call", torch.arange, 3, device=torch.device(device)).meta.device.type == device
    assert g.call("iota", (3,), 0, torch.int64).meta.device.type == "cpu"
