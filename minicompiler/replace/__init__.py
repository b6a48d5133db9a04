"""replace: torch-level rewrites that swap a known pattern for a better whole call, run on the
captured graph before `decompose` (which would take the patterns apart).

    fold_conv_batch_norm   eval-mode batch norm folded into the convolution before it (seed 004)
    replace_attention      hand-written attention -> scaled_dot_product_attention (seed 002)
    split_conv_bias        a convolution's bias added by the kernel after it (Triton only)

Each pass is a function `(graph, log=None) -> graph`; one that rewrote something is its own
step in the report, with one log line per rewrite.
"""

from minicompiler.replace.attention import replace_attention
from minicompiler.replace.conv_bias import split_conv_bias
from minicompiler.replace.conv_bn import fold_conv_batch_norm

# (report step name, pass, the backends it is for: None for all)
PASSES = (
    ("fold conv+bn", fold_conv_batch_norm, None),
    ("replace attention", replace_attention, None),
    ("conv bias", split_conv_bias, ("triton",)),  # after the fold, which gives a convolution its bias
)

__all__ = ["PASSES", "fold_conv_batch_norm", "replace_attention", "split_conv_bias"]
