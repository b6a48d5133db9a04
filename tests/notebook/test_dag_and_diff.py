"""The DAG drawing (parsed from a printed graph, laid out in layers) and the graph diff."""

from __future__ import annotations

import torch

from minicompiler.ir import Graph, TensorMeta, graph_to_python
from minicompiler.notebook.dag import dag_svg, parse_graph
from minicompiler.notebook.diff import diff_lines, diff_summary


def printed_graph() -> str:
    g = Graph()
    x = g.placeholder("x", TensorMeta((4, 8), torch.float32))
    w = g.placeholder("w", TensorMeta((8,), torch.float32))
    cos = g.call("cos", x)
    mul = g.call("mul", cos, w)
    total = g.call("sum", mul, (1,), False)
    g.output((total, {"scaled": mul}))
    return graph_to_python(g)


def test_parse_graph_reads_nodes_edges_and_types_from_the_printer() -> None:
    dag = parse_graph(printed_graph())
    assert list(dag.nodes) == ["x", "w", "cos", "mul", "sum", "output"]
    assert dag.nodes["mul"].inputs == ["cos", "w"] and dag.nodes["mul"].op == "mul"
    assert dag.nodes["output"].inputs == ["sum", "mul"]
    assert dag.nodes["x"].meta == "float32[4, 8]" and dag.nodes["sum"].meta == "float32[4]"


def test_layers_are_longest_paths_and_inputs_sit_above_users() -> None:
    dag = parse_graph(printed_graph())
    assert [dag.nodes[n].layer for n in dag.nodes] == [0, 0, 1, 2, 3, 4]
    for node in dag.nodes.values():
        assert all(dag.nodes[i].y < node.y for i in node.inputs)
    xs = [n.x for n in dag.nodes.values() if n.layer == 0]
    assert len(set(xs)) == 2  # two inputs side by side, not on top of each other


def test_svg_has_a_box_per_node_an_edge_per_input_and_the_given_colours() -> None:
    dag = parse_graph(printed_graph())
    svg = dag_svg(dag, colors={"cos": "#123456"}, highlighted={"mul"}, titles={"cos": "cos: kernel_0"})
    assert svg.count("<rect") == 6 and svg.count("<path") == 6
    assert "fill='#123456'" in svg and "stroke-width='3'" in svg and "<title>cos: kernel_0</title>" in svg


def test_text_that_is_not_a_printed_graph_is_not_drawn() -> None:
    assert parse_graph("steps:\n  kernel_0: pointwise") is None
    assert parse_graph("x = 1\ny = 2") is None


def test_diff_ignores_realignment_and_places_removed_lines() -> None:
    old = "def f(x):\n    a = ops.cos(x)   # f32\n    return a"
    new = "def f(x):\n    a = ops.cos(x)        # f32\n    b = ops.sin(a)        # f32\n    return b"
    kinds = [(d.kind, d.text.split("=")[0].strip()) for d in diff_lines(old, new)]
    assert kinds == [("same", "def f(x):"), ("same", "a"), ("removed", "return a"), ("added", "b"),
                     ("added", "return b")]
    assert diff_summary(diff_lines(old, new)) == "+2 -1 lines"
    assert diff_summary(diff_lines(old, old)) == "no change"
