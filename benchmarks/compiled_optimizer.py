"""Compiled optimizer step vs torch's: milliseconds per step at 1 and 2 threads (CPU).

    python benchmarks/compiled_optimizer.py [--threads 1 2] [--params 20] [--size 256]

An earlier measurement found compiled AdamW at 2 threads far slower than eager (184 ms vs 1.1 ms
per step). This times each part of a compiled step separately, so a regression shows where it is:
  eager      torch.optim.AdamW.step() (foreach)
  compiled   minicompiler.compile(opt.step)() : guards + the compiled update's kernels
Each number is the median of `--repeats` rounds after warm-up (compiling on the first call), eager and
compiled timed in turn round by round, so a busy moment of a shared machine falls on both. Nothing here is
asserted. Changed inputs are written in place by the kernels (fuse/in_place.py); before that, each step
ended with one copy_ per parameter and state tensor (32 for AdamW with 8 parameters).
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import minicompiler
from minicompiler.bench.timing import interleaved_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--params", type=int, default=8, help="number of parameter tensors")
    parser.add_argument("--size", type=int, default=256, help="each parameter is size x size")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(f"{'threads':>7} {'optimizer':>9} {'eager ms':>9} {'compiled ms':>12}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for kind in (torch.optim.AdamW, torch.optim.SGD):
            params = [nn.Parameter(torch.randn(args.size, args.size)) for _ in range(args.params)]
            for p in params:
                p.grad = torch.randn_like(p)
            settings = {"lr": 1e-3} if kind is torch.optim.AdamW else {"lr": 1e-3, "momentum": 0.9}
            eager = kind([p.detach().clone().requires_grad_() for p in params], **settings)
            for p, q in zip(eager.param_groups[0]["params"], params, strict=True):
                p.grad = q.grad.clone()
            compiled = minicompiler.compile(kind(params, **settings).step)
            times = interleaved_seconds({"eager": eager.step, "compiled": compiled}, args.repeats, warmup=3)
            print(f"{threads:>7} {kind.__name__:>9} {times['eager'] * 1e3:>9.3f} {times['compiled'] * 1e3:>12.3f}",
                  flush=True)


if __name__ == "__main__":
    main()
