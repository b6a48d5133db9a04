"""Which block size and warp count make a generated pointwise Triton kernel move the most bytes?

    python benchmarks/triton_block_sweep.py      # on a CUDA machine

Times cos(cos(x)) and sin(x)+cos(x) over 4M floats for each (BLOCK, num_warps), by CUDA graph
replay (kernel time only), as a fraction of a device-to-device copy's bandwidth.
"""

from __future__ import annotations

import torch

import minicompiler
from minicompiler.bench.timing import device_seconds
from minicompiler.bench.workloads import double_cosine, sin_plus_cos
from minicompiler.codegen import triton as triton_codegen


def main() -> None:
    x = torch.randn(1 << 22, device="cuda")
    moved = 2 * x.numel() * x.element_size()
    copy = moved / device_seconds(torch.empty_like(x).copy_, (x,))
    print(f"{torch.cuda.get_device_name()}: copy {copy / 1e9:.0f} GB/s")
    for block in (512, 1024, 2048):
        for warps in (2, 4, 8):
            triton_codegen.POINTWISE_BLOCK, triton_codegen.POINTWISE_WARPS = block, warps
            fractions = []
            for fn in (double_cosine, sin_plus_cos):
                compiled = minicompiler.compile(fn)
                fractions.append(moved / device_seconds(compiled, (x,)) / copy)
            print(f"BLOCK={block:5} num_warps={warps}: cos(cos) {fractions[0]:.0%}  sin+cos {fractions[1]:.0%}")


if __name__ == "__main__":
    main()
