"""Buffer planning: which values live in memory, and why.

Inside a kernel a value is a register. It becomes a buffer (a contiguous tensor the wrapper
allocates) only when something outside its kernel reads it: the graph's output, an extern
call, a view, or another kernel. Inputs, extern outputs and views are buffers by nature.
`full` constants are written inline into every kernel that reads them, so kernels never
load them.
"""

from __future__ import annotations

from minicompiler.fuse.schedule import Alias, Buffer, ExternCall, Kernel, Step
from minicompiler.ir.graph import Graph, Node
from minicompiler.ir.ops import INLINE


def _step_nodes(step: Step) -> list[Node]:
    return step.nodes if isinstance(step, Kernel) else [step.node]


def _reader(user: Node, owner: dict[Node, Step]) -> str:
    step = owner[user]
    if isinstance(step, Kernel):
        return f"read by {step.name}"
    if isinstance(step, Alias):
        return f"viewed by {user.name}"
    return f"read by extern {user.op} ({user.name})"


def plan_buffers(graph: Graph, steps: list[Step]) -> dict[Node, Buffer]:
    """Every buffer of the schedule; also fills each kernel's `inputs` and `outputs`."""
    owner = {node: step for step in steps for node in _step_nodes(step)}
    users = graph.users()
    buffers = {node: Buffer(node, "input") for node in graph.inputs}
    for step in steps:
        if isinstance(step, Alias | ExternCall):
            buffers[step.node] = Buffer(step.node, "alias" if isinstance(step, Alias) else "extern")
            continue
        for node in step.nodes:
            reasons = ["graph output"] if any(u.op == "output" for u in users[node]) else []
            reasons += [_reader(u, owner) for u in users[node] if u.op != "output" and owner[u] is not step]
            if reasons:
                buffers[node] = Buffer(node, "kernel", tuple(dict.fromkeys(reasons)))
        step.outputs = [buffers[n] for n in step.nodes if n in buffers]
    for kernel in (s for s in steps if isinstance(s, Kernel)):
        members = set(kernel.nodes)
        # constants and indices are computed where they are read, unless load_at reads one (from memory)
        reads = [i for n in kernel.nodes for i in n.inputs() if i not in members
                 and (i.op not in INLINE or (n.op == "load_at" and i is n.args[0]))]
        kernel.inputs = [buffers[n] for n in dict.fromkeys(reads)]
    return buffers
