"""Deferred: how a replacement pass drops a chain of nodes and rebuilds it as one call.

`ir.rewrite` copies nodes front to back and hands each rule its arguments already mapped into
the new graph. A pass that replaces a chain (conv -> batch_norm, matmul -> ... -> matmul) answers
`Deferred` for every node of the chain but the last: nothing is emitted for them, and the next
node of the chain finds the Deferred (with its mapped arguments) among its own arguments. The
last node then builds the replacement from the whole chain's mapped arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minicompiler.ir import Node


@dataclass(frozen=True)
class Deferred:
    node: Node  # the old node, not emitted
    args: tuple[Any, ...]  # its arguments, mapped into the new graph
    kwargs: dict[str, Any]


def single_use(node: Node, users: dict[Node, list[Node]], user: Node) -> bool:
    """Is `user` the only reader of `node` (so the chain may swallow `node`)?"""
    return users[node] == [user]
