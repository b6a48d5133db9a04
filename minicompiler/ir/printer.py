"""Print a Graph as runnable Python.

The printed function uses the ops in `minicompiler.ir.ops.OPS` through a namespace
`ops`, so `exec` of the text (with `ops=OPS_NAMESPACE`) runs the graph — the lightning-thunder
habit of making every stage readable *and* executable:

    def forward(x: "f32[1024]"):
        cos = ops.cos(x)            # f32[1024]   user.py:3  a = torch.cos(x)
        cos_1 = ops.cos(cos)        # f32[1024]   user.py:4  b = torch.cos(a)
        return cos_1
"""

from __future__ import annotations

import types
from typing import Any

import torch

from minicompiler.ir.graph import Graph, Node
from minicompiler.ir.ops import OPS
from minicompiler.ir.symbolic import SymSize


def format_value(value: Any) -> str:
    """Python source for an argument: node names, constants, dtypes, nested structures."""
    if isinstance(value, Node):
        return value.name
    if isinstance(value, SymSize):
        return value.code()  # a symbolic size, e.g. 16*s0
    if isinstance(value, torch.dtype):
        return str(value)  # "torch.float32"
    if isinstance(value, torch.device):
        return repr(str(value))
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return f"{type(value).__name__}({', '.join(format_value(v) for v in value)})"
    if isinstance(value, tuple):
        inner = ", ".join(format_value(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return f"[{', '.join(format_value(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return f"float({str(value)!r})"
    if callable(value):
        module = getattr(value, "__module__", None) or "torch"
        return f"{module}.{getattr(value, '__qualname__', getattr(value, '__name__', repr(value)))}"
    return repr(value)


def format_call(node: Node) -> str:
    parts = [format_value(a) for a in node.args]
    parts += [f"{k}={format_value(v)}" for k, v in node.kwargs.items()]
    return f"ops.{node.op}({', '.join(parts)})"


def graph_to_python(graph: Graph, name: str = "forward", provenance: bool = True) -> str:
    """The graph as a Python function; each line commented with its type and source line."""
    params = ", ".join(f'{n.name}: "{n.meta}"' for n in graph.inputs)
    lines = [f"def {name}({params}):"]
    body = [(f"{n.name} = {format_call(n)}", n) for n in graph.compute_nodes()]
    width = max((len(code) for code, _ in body), default=0)
    for code, node in body:
        comment = f"  # {node.meta}"
        if provenance and node.source is not None:
            comment += f"  {node.source.filename.rsplit('/', 1)[-1]}:{node.source.lineno}"
            if node.source.line:
                comment += f"  {node.source.line}"
        lines.append(f"    {code.ljust(width)}{comment}")
    lines.append(f"    return {format_value(graph.outputs)}")
    return "\n".join(lines)


# `ops.<name>` in printed graphs resolves to the op's torch meaning.
OPS_NAMESPACE = types.SimpleNamespace(**{name: op.impl for name, op in OPS.items()})


def compile_printed(graph: Graph, name: str = "forward") -> Any:
    """exec the printed text and return the function: proof that the printout is runnable."""
    namespace: dict[str, Any] = {"ops": OPS_NAMESPACE, "torch": torch, "float": float}
    exec(graph_to_python(graph, name, provenance=False), namespace)
    return namespace[name]
