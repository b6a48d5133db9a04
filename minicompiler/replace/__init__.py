"""replace: torch-level rewrites that swap a known pattern for a better whole call, run on the
captured graph before `decompose` (which would take the patterns apart).

    fold_conv_batch_norm   eval-mode batch norm folded into the convolution before it (seed 004)
    replace_attention      hand-written attention -> scaled_dot_product_attention (seed 002)
    batch_norm_as_affine   eval-mode batch norm as pointwise ops, where CUDA graphs cannot keep a fold
    split_conv_bias        a convolution's bias added by the kernel after it (Triton only)

Each pass is a function `(graph, log=None, **options) -> graph`; one that rewrote something is
its own step in the report, with one log line per rewrite. The options come from what the graph is
compiled for: attention's choice depends on whether that is a training step.
"""

from minicompiler.replace.attention import replace_attention
from minicompiler.replace.batch_norm import batch_norm_as_affine
from minicompiler.replace.conv_bias import split_conv_bias
from minicompiler.replace.conv_bn import fold_conv_batch_norm


def _keeps_folds(backend: str, cuda_graphs: bool) -> bool:
    return not (backend == "triton" and cuda_graphs)  # a CUDA graph replays the fold every call


def _no_options(training: bool) -> dict[str, bool]:
    return {}


# (report step name, pass, whether it runs for a backend with or without CUDA graphs, its options
# for a graph compiled for a training step or not)
PASSES = (
    ("fold conv+bn", fold_conv_batch_norm, _keeps_folds, _no_options),
    ("batch norm", batch_norm_as_affine, lambda backend, cuda_graphs: not _keeps_folds(backend, cuda_graphs),
     _no_options),
    ("replace attention", replace_attention, lambda backend, cuda_graphs: True,
     lambda training: {"training": training}),
    # after the fold, which gives a convolution its bias
    ("conv bias", split_conv_bias, lambda backend, cuda_graphs: backend == "triton", _no_options),
)

__all__ = ["PASSES", "batch_norm_as_affine", "fold_conv_batch_norm", "replace_attention", "split_conv_bias"]
