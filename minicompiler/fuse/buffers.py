"""Buffer planning: which values live in memory, and why.

Inside a kernel a value is a register. It becomes a buffer (a contiguous tensor the wrapper
allocates) only when something outside its kernel reads it: the graph's output, an extern
call, a view, or another kernel. Inputs, extern outputs and views are buffers by nature.
`full` constants are written inline into every kernel that reads them, so kernels never
load them. A scatter (store_at) writes into its base's memory where nothing else needs the base,
else into a copy of it.
"""

from __future__ import annotations

import dataclasses

from minicompiler.fuse.schedule import Alias, Buffer, ExternCall, Kernel, Step, writes_into
from minicompiler.ir.graph import Graph, Node
from minicompiler.ir.ops import INLINE, OPS


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
        # constants and indices are computed where they are read, unless load_at reads one (from
        # memory); a scatter's base is not read: its memory, or a copy of it, is the scatter's buffer
        reads = [i for n in kernel.nodes for i in n.inputs() if i not in members and not writes_into(n, i)
                 and (i.op not in INLINE or (n.op == "load_at" and i is n.args[0]))]
        kernel.inputs = [buffers[n] for n in dict.fromkeys(reads)]
        for scatter in (n for n in kernel.nodes if OPS[n.op].kind == "scatter"):
            buffers[scatter] = _scatter_buffer(buffers[scatter], buffers, users[scatter.args[0]])
        kernel.outputs = [buffers[b.node] for b in kernel.outputs]
    return buffers


def _scatter_buffer(buffer: Buffer, buffers: dict[Node, Buffer], base_users: list[Node]) -> Buffer:
    """A scatter writes into its base's own memory where nothing else reads the base (a kernel's
    value laid out row-major, as the copy the decompositions make is), else into a copy of it that
    the wrapper makes (an input, or one zero-filled buffer that two scatters start from)."""
    base = buffer.node.args[0]
    own = buffers.get(base)
    if own is not None and own.origin == "kernel" and base_users == [buffer.node] and base.meta.is_contiguous():
        return dataclasses.replace(buffer, into=base)
    return dataclasses.replace(buffer, copy_of=base)
