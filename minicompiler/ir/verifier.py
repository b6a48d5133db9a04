"""Check a Graph's invariants; every pass's output is verified in tests and in debug mode."""

from __future__ import annotations

from minicompiler.ir.graph import Graph
from minicompiler.ir.ops import OPS, infer_meta


class GraphVerificationError(AssertionError):
    pass


def verify(graph: Graph, primitive_only: bool = False) -> None:
    """Raise GraphVerificationError unless: nodes are in a valid order, every op is known
    (and primitive, if asked), names are unique, and each node's meta is what the op table
    infers from its inputs."""

    def fail(msg: str) -> None:
        raise GraphVerificationError(f"{msg}\n{graph}")

    if not graph.nodes or graph.nodes[-1].op != "output":
        fail("graph must end with one output node")
    seen, names = set(), set()
    for node in graph.nodes:
        if node.name in names:
            fail(f"duplicate node name {node.name}")
        names.add(node.name)
        for inp in node.inputs():
            if inp not in seen:
                fail(f"{node.name} reads {inp.name} before it is defined")
        if node.op == "output":
            if node is not graph.nodes[-1]:
                fail("output node must be last")
        elif node.op == "placeholder":
            if any(n.op != "placeholder" for n in seen):
                fail(f"placeholder {node.name} after compute nodes")
        else:
            if node.op not in OPS:
                fail(f"unknown op {node.op}")
            if primitive_only and not OPS[node.op].is_primitive:
                fail(f"{node.name}: {node.op} is not a primitive op")
            expected = infer_meta(node.op, node.args, node.kwargs)
            if (expected.shape, expected.dtype) != (node.meta.shape, node.meta.dtype):
                fail(f"{node.name}: meta {node.meta} but op infers {expected}")
        seen.add(node)
