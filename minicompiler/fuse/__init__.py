"""fuse: group a primitive graph's nodes into kernels (TorchInductor's scheduler, small).

    schedule = fuse(graph)
    for step in schedule.steps: ...        # Kernel | ExternCall | Alias, in run order
    for d in schedule.decisions: print(d)  # why each producer/consumer pair did (not) fuse
"""

from minicompiler.fuse.rules import can_fuse, iteration_space, reduction_dims
from minicompiler.fuse.schedule import (
    Alias,
    Buffer,
    ExternCall,
    FusionDecision,
    Kernel,
    Schedule,
    Step,
)
from minicompiler.fuse.scheduler import FuseError, fuse

__all__ = [
    "Alias", "Buffer", "ExternCall", "FuseError", "FusionDecision", "Kernel", "Schedule", "Step",
    "can_fuse", "fuse", "iteration_space", "reduction_dims",
]
