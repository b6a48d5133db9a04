"""simplify: algebraic rewrites, constant folding, CSE and DCE, applied until nothing changes.

Each pass is a function `(graph, log=None) -> graph` and can be used alone; `simplify`
runs them all in a fixed order.
"""

from minicompiler.simplify.algebraic import RULES, Rule, apply_algebraic_rules
from minicompiler.simplify.constant_folding import fold_constants
from minicompiler.simplify.cse import eliminate_common_subexpressions
from minicompiler.simplify.dce import eliminate_dead_code
from minicompiler.simplify.pipeline import PASSES, simplify, simplify_with_log

__all__ = [
    "PASSES", "RULES", "Rule", "apply_algebraic_rules", "eliminate_common_subexpressions",
    "eliminate_dead_code", "fold_constants", "simplify", "simplify_with_log",
]
