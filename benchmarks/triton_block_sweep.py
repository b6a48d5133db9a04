"""Which block size, warp count and L2 policy make a generated pointwise Triton kernel move the
most bytes?

    python benchmarks/triton_block_sweep.py      # on a CUDA machine

Compiles cos(cos(x)) and sin(x)+cos(x) over 4M floats with each setting of the Triton backend's
POINTWISE_BLOCK, POINTWISE_WARPS and STREAMING_LOADS, and times the kernels by CUDA graph replay
as a fraction of a device-to-device copy's bandwidth (`bench.bandwidth`: copy and kernel timed in
turn, median of 5 rounds), beside torch.compile's.
"""

from __future__ import annotations

import itertools

import torch

import minicompiler
from minicompiler.bench.__main__ import bandwidth
from minicompiler.bench.workloads import double_cosine, sin_plus_cos
from minicompiler.codegen import triton as triton_codegen


def main() -> None:
    x = torch.randn(1 << 22, device="cuda")
    print(torch.cuda.get_device_name())
    for block, warps, policy in itertools.product((512, 1024, 2048), (2, 4, 8), (None, "evict_first")):
        triton_codegen.POINTWISE_BLOCK, triton_codegen.POINTWISE_WARPS = block, warps
        triton_codegen.STREAMING_LOADS = policy
        results = []
        for fn in (double_cosine, sin_plus_cos):
            row = bandwidth(x, minicompiler.compile(fn), torch.compile(fn))
            results.append(f"{fn.__name__} {row['mc_fraction_of_copy']:.1%} (torch.compile "
                           f"{row['tc_fraction_of_copy']:.1%})")
        print(f"BLOCK={block:5} num_warps={warps} loads={policy}: {'  '.join(results)}", flush=True)


if __name__ == "__main__":
    main()
