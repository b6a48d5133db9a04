"""How far a training step's gradients are from exact, eager and compiled: is a difference a bug
or float32 rounding? The bench (minicompiler.bench.compare) compares compiled float32 with eager
float32, and a deep network with batch norms in training mode amplifies rounding. Here both are
compared with eager float64 instead, and minicompiler float64 with it too (which must agree to
~1e-10: anything more is a bug, not rounding).

    python benchmarks/training_precision.py [--device cuda] "timm resnet50" "torchvision resnet50"

The error of one step is the bench's (compare.step_error): the largest difference of the loss or
of any parameter's gradient, over that gradient's largest value (at least 1e-3 of the largest
gradient of the model). The bench now judges a training step this way too.
"""

from __future__ import annotations

import argparse
import copy

import torch

import minicompiler
from minicompiler.bench.compare import step_error, tensor_of
from minicompiler.bench.zoo import CASES, Skip, quiet_randomness


def gradients(model: torch.nn.Module, step: torch.nn.Module | None, inputs: tuple) -> tuple[torch.Tensor, list]:
    model.zero_grad(set_to_none=True)
    loss = tensor_of((step or model)(*inputs)).double().square().mean()
    loss.backward()
    return loss, [p.grad for p in model.parameters()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="the zoo's smaller sizes")
    parser.add_argument("models", nargs="+", help="names from minicompiler.bench.zoo")
    args = parser.parse_args()
    print(f"device {torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}, torch {torch.__version__}, "
          f"TF32 convolutions {torch.backends.cudnn.allow_tf32}; error vs eager float64")
    for name in args.models:
        case = next(c for c in CASES if c.name == name)
        try:
            built = case.make(args.device, args.quick)
        except Skip as reason:
            print(f"{name}: skipped, {reason}")
            continue
        base = quiet_randomness(built.module).train()
        exact = copy.deepcopy(base).double()
        reference = gradients(exact, None, tuple(x.double() for x in built.inputs))
        rows = {}
        for label, dtype, compile_it in (("eager float32", torch.float32, False),
                                         ("minicompiler float32", torch.float32, True),
                                         ("minicompiler float64", torch.float64, True)):
            model = copy.deepcopy(base).to(dtype)
            inputs = tuple(x.to(dtype) for x in built.inputs)
            rows[label] = step_error(gradients(model, minicompiler.compile(model) if compile_it else None, inputs),
                                     reference)
        for label, error in rows.items():
            print(f"  {name:<24}{label:<24}{error:10.2e}")


if __name__ == "__main__":
    main()
