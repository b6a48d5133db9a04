"""simplify: the four passes, in a fixed order, until a round changes nothing."""

from __future__ import annotations

from collections.abc import Callable

from minicompiler.ir import Graph
from minicompiler.simplify.algebraic import apply_algebraic_rules
from minicompiler.simplify.constant_folding import fold_constants
from minicompiler.simplify.cse import eliminate_common_subexpressions
from minicompiler.simplify.dce import eliminate_dead_code

Pass = Callable[[Graph, list[str] | None], Graph]

# Folding first makes constants the rules can see; the rules leave repeats for CSE and
# bypassed nodes for DCE.
PASSES: tuple[Pass, ...] = (
    fold_constants,
    apply_algebraic_rules,
    eliminate_common_subexpressions,
    eliminate_dead_code,
)
MAX_ROUNDS = 10  # a guard: real graphs settle in two or three rounds


def simplify_with_log(graph: Graph) -> tuple[Graph, list[str]]:
    """The simplified graph and one line per rewrite applied, e.g.
    "algebraic: %exp: exp(log(x)) -> x at user.py:4 (y = torch.exp(torch.log(x)))"."""
    log: list[str] = []
    for _ in range(MAX_ROUNDS):
        applied_before = len(log)
        for simplify_pass in PASSES:
            graph = simplify_pass(graph, log)
        if len(log) == applied_before:  # every pass logs each change: no line, no change
            break
    return graph, log


def simplify(graph: Graph) -> Graph:
    """A new graph computing the same outputs with fewer or cheaper nodes."""
    return simplify_with_log(graph)[0]
