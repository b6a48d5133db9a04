"""decompose: torch-level ops -> primitive ops (PrimTorch's job).

`decompose(graph)` rewrites every composite op with the decomposition table and puts the
primitives' arguments in canonical form. The table is filled by the modules imported below,
one small function per op.
"""

from minicompiler.decompose import (  # noqa: F401  (fill the table)
    gathers,
    losses,
    matmul,
    pointwise,
    pooling,
    random,
    reductions,
    resizing,
    rounding,
    scatters,
    shapes,
    special,
    special_functions,
)
from minicompiler.decompose.table import (
    DECOMPOSITIONS,
    DecompositionError,
    GraphOps,
    decompose,
    register_decomposition,
)

__all__ = ["DECOMPOSITIONS", "DecompositionError", "GraphOps", "decompose", "register_decomposition"]
