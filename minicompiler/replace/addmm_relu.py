"""A ReLU after a matrix multiply with a bias: one call, the ReLU applied as the product is written.

`nn.Linear` then `nn.ReLU` decompose into `y = addmm(b, x, w.t())` and `where(le(y, 0), 0, y)`:
the matmul's call, then a kernel that reads the whole product again to write the ReLU's output
(one more allocation, launch and pass over memory per layer; a GPU layer of an MLP is a few
microseconds, so these count). torch has the pair as one call, `torch._addmm_activation(b, x, w)`:
on the GPU cuBLASLt applies the ReLU in the matmul's epilogue, as it stores the product. (On the
CPU torch runs addmm, then the ReLU in place: the same two passes, so the pipeline swaps on the
GPU only.) Swapped only where nothing else reads the product or its mask (an inference program;
a training forward keeps one of them for the ReLU's gradient). Runs on a graph just before it is
lowered, in place.
"""

from __future__ import annotations

import torch

from minicompiler.ir import Graph, Node
from minicompiler.simplify.facts import location


def addmm_relu(graph: Graph) -> list[str]:
    """Turn each ReLU of an addmm nothing else reads into one `_addmm_activation` call; one note each."""
    notes = []
    users = graph.users()
    for node in graph.compute_nodes():
        if (product := _relu_of_addmm(node, users)) is None:
            continue
        mask = node.args[0]
        node.op, node.args, node.kwargs = "torch_call", (torch._addmm_activation, *product.args), {}
        graph.nodes.remove(mask)
        graph.nodes.remove(product)
        notes.append(f"{node.name}: addmm and its ReLU as one call (torch._addmm_activation){location(node)}")
    return notes


def relus_of_addmm(graph: Graph) -> bool:
    """Does `graph` have a ReLU `addmm_relu` rewrites?"""
    users = graph.users()
    return any(_relu_of_addmm(node, users) is not None for node in graph.compute_nodes())


def _relu_of_addmm(node: Node, users: dict[Node, list[Node]]) -> Node | None:
    """where(le(y, 0), 0, y), y = addmm(b, x, w), read by nothing else -> y."""
    if node.op != "where" or node.kwargs or isinstance(node.args[1], Node) or node.args[1] != 0:
        return None
    mask, product = node.args[0], node.args[2]
    if not (isinstance(mask, Node) and mask.op == "le" and isinstance(product, Node) and product.op == "addmm"
            and mask.args == (product, 0) and not mask.kwargs):
        return None
    if product.kwargs or len(product.args) != 3 or not product.meta.dtype.is_floating_point:
        return None
    # the mask and product read by this ReLU alone (the graph's outputs are users too)
    return product if users[mask] == [node] and set(users[product]) == {mask, node} else None
