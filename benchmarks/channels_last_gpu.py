"""Channels-last convolutions (layout.py's layout optimization): does it pay? Median ms per call.

    python benchmarks/channels_last_gpu.py                        # CUDA: ResNet-18, batch 16, 224x224
    python benchmarks/channels_last_gpu.py --device cpu --batch 2 --size 64

A ResNet-18 (written out here: torchvision is not a dependency) in eval mode, row-major weights
and input, timed in turn round by round (minicompiler.bench.timing.interleaved_seconds):
  eager              the model as is
  minicompiler off   options={"layout_optimization": False}: convolutions run as eager's do
  minicompiler on    options={"layout_optimization": True}: convolutions channels-last (the CUDA default)
Each compiled output is checked against eager first. Nothing here is asserted about speed.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import minicompiler
from minicompiler.bench.timing import interleaved_seconds


class BasicBlock(nn.Module):
    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut = nn.Sequential()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


def resnet18(classes: int = 1000) -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                               nn.MaxPool2d(3, 2, 1)]
    channels = 64
    for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(channels, width, stride), BasicBlock(width, width, 1)]
        channels = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes)]
    return nn.Sequential(*layers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = resnet18().to(args.device).eval()
    x = torch.randn(args.batch, 3, args.size, args.size, device=args.device)
    runs = {"eager": model}
    for on in (False, True):
        runs[f"minicompiler {'on' if on else 'off'}"] = minicompiler.compile(model, options={"layout_optimization": on})
    with torch.no_grad():
        expected = model(x)
        for name, run in runs.items():
            out = run(x)  # compiles
            torch.testing.assert_close(out, expected, rtol=1e-3, atol=1e-3)
            assert out.stride() == expected.stride(), name
        times = interleaved_seconds({name: (lambda run=run: run(x)) for name, run in runs.items()}, args.repeats)
    device = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"ResNet-18 eval, batch {args.batch}, {args.size}x{args.size}, {device}, torch {torch.__version__}")
    for name, seconds in times.items():
        print(f"  {name:<18} {seconds * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
