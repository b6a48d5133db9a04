"""Library calls in a training program record their backward in the forward (ir/recorded_calls.py).

`differentiate` gives a `torch_call` (a function the compiler has no rule for: attention, say)
`torch_call_vjp` gradients, which run the call again under torch autograd in the backward. This
pass, on the joint graph, turns the pair into `recorded_call` and `recorded_vjp`: the forward's call
runs under autograd and keeps what autograd recorded, and the backward takes the gradients from
that, as eager does. Attention then runs once per training step, not twice (BERT-base on the H100:
the forward attention kernel ran 24 times per step, 12 of them in the backward).

Left as they are: calls inside a torch.utils.checkpoint region (recomputing them in the backward
is what the user asked for), and every call of a program replayed from CUDA graphs (a replayed
forward records nothing: the backward would find no recording to take its gradients from).
"""

from __future__ import annotations

from minicompiler.autograd.joint import JointGraph
from minicompiler.autograd.partition import CHECKPOINT


def record_library_calls(joint: JointGraph) -> list[str]:
    """Turn each differentiated torch_call and its torch_call_vjps into a recorded_call and
    recorded_vjps, in place; one note per call."""
    by_name = {node.name: node for node in joint.graph.nodes}
    notes = []
    for node in joint.graph.compute_nodes():
        forward = by_name.get(node.tags.get("backward_of", ""))
        if (node.op != "torch_call_vjp" or forward is None or forward.op not in ("torch_call", "recorded_call")
                or CHECKPOINT in forward.tags):
            continue
        fn, argnum, grad, *args = node.args
        called = forward.args if forward.op == "torch_call" else forward.args[2:]
        if not _same_call(called, forward.kwargs, (fn, *args), node.kwargs):
            continue
        if forward.op == "torch_call":  # recorded_call(name, the arguments differentiated, fn, *args)
            forward.op, forward.args = "recorded_call", (forward.name, (), *forward.args)
            notes.append(f"{forward.name}: {getattr(fn, '__name__', fn)} keeps its backward from the forward")
        name, differentiated, *call = forward.args
        forward.args = (name, tuple(sorted({*differentiated, argnum})), *call)
        node.op, node.args = "recorded_vjp", (forward.name, forward, fn, argnum, grad, *args)
    return notes


def _same_call(call: tuple, keywords: dict, differentiated: tuple, vjp_keywords: dict) -> bool:
    """Whether a vjp differentiates exactly the forward's call: the same function, arguments and
    keywords, the very same objects (the rule passed them on)."""
    return (len(call) == len(differentiated) and all(a is b for a, b in zip(call, differentiated, strict=False))
            and keywords.keys() == vjp_keywords.keys() and all(keywords[k] is vjp_keywords[k] for k in keywords))
