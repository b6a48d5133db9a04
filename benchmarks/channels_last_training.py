"""Channels-last convolutions in a training step: does the layout optimization pay there? ms per step.

    python benchmarks/channels_last_training.py [MODEL ...] [--repeats N]

MODEL: names from minicompiler/bench/zoo.py (default: seed 003's CNN and ResNet-18 at batch 1 and
16). Each model's training step (minicompiler/bench/compare.py: zero_grad, forward, weighted mean,
backward, SGD with momentum) is run by three compilers, checked against eager, then timed in turn
round by round:
  eager              the model as is
  layout off         minicompiler, options={"layout_optimization": False}: convolutions as eager's
  layout on          minicompiler, options={"layout_optimization": True}: convolutions channels-last
In training a weight changes at every step, so channels-last costs a copy of each weight per step
and, for its gradient (which torch keeps in the parameter's layout), a copy back; inference pays
the weight copy once. Nothing here is asserted about speed.
"""

from __future__ import annotations

import argparse

import torch

import minicompiler
from minicompiler.bench.compare import bench_training
from minicompiler.bench.zoo import CASES

DEFAULT_MODELS = ["seed 003 CNN", "ResNet-18 b1", "ResNet-18 b16"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    chosen = {"eager": lambda m: m}
    for on in (False, True):
        chosen[f"layout {'on' if on else 'off'}"] = (
            lambda m, on=on: minicompiler.compile(m, options={"layout_optimization": on}))
    name = torch.cuda.get_device_name() if device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"training step, ms (speed-up over eager); {name}, torch {torch.__version__}")
    for model in args.models:
        torch.manual_seed(0)
        built = next(c for c in CASES if c.name == model).make(device, device == "cpu")
        results, _ = bench_training(built, chosen, args.repeats)
        eager = results["eager"]["s"]
        cells = []
        for compiler, row in results.items():
            if "error" in row:
                cells.append(f"{compiler} ERR {row['error'][:60]}")
            else:
                wrong = "" if row["correct"] else " WRONG"
                cells.append(f"{compiler} {row['s'] * 1e3:7.3f} ({eager / row['s']:.2f}x){wrong}")
        print(f"{model:28} " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
