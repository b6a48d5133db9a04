"""The H100 bandwidth bar, measured several times: cos(cos(x)) and sin(x)+cos(x) over 4M floats.

    python benchmarks/bandwidth_check.py [times]      # on a CUDA machine

Each measurement is `bench.bandwidth` (copy and kernels timed in turn, median of 5 rounds); one
number moves by a point or two from run to run, so the bar is judged on several.
"""

from __future__ import annotations

import sys

import torch

import minicompiler
from minicompiler.bench.__main__ import bandwidth
from minicompiler.bench.workloads import double_cosine, sin_plus_cos


def main() -> None:
    times = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    x = torch.randn(1 << 22, device="cuda")
    compiled = {fn: (minicompiler.compile(fn), torch.compile(fn)) for fn in (double_cosine, sin_plus_cos)}
    print(torch.cuda.get_device_name(), torch.__version__)
    for _ in range(times):
        for fn, (mc, tc) in compiled.items():
            row = bandwidth(x, mc, tc)
            print(f"{fn.__name__:14} minicompiler {row['mc_fraction_of_copy']:.1%}  torch.compile "
                  f"{row['tc_fraction_of_copy']:.1%}  copy {row['copy_bandwidth_GBps']:.0f} GB/s", flush=True)


if __name__ == "__main__":
    main()
