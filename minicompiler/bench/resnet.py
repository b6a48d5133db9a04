"""ResNet-18, written out: the model seed 001 times (`torchvision.models.resnet18()`), without torchvision.

torchvision does not import everywhere this kit runs (its wheel must match torch's exactly), so the
benchmarks and notebook 10 build this copy instead. It is the same network as torchvision's, layer for
layer: the same module names, parameter names and shapes (so a torchvision state_dict loads into it
unchanged) and the same initialization. Only what ResNet-18 uses is here: BasicBlock (two 3x3
convolutions and a shortcut), not the Bottleneck of ResNet-50, nor torchvision's options (groups,
dilation, zero_init_residual, a custom norm layer).

    model = resnet18().eval()
    logits = model(torch.randn(16, 3, 224, 224))  # (16, 1000)

Shapes below are for a 224x224 image: (B, C, H, W).
"""

from __future__ import annotations

import torch
from torch import nn


def conv3x3(in_channels: int, out_channels: int, stride: int = 1) -> nn.Conv2d:
    """3x3 convolution, padded so that stride 1 keeps the size (no bias: a BatchNorm follows)."""
    return nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_channels: int, out_channels: int, stride: int = 1) -> nn.Conv2d:
    """1x1 convolution: changes the channel count (and, strided, the size) of a shortcut."""
    return nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)): the residual block of ResNet-18 and -34.

    The shortcut is `x` itself, or, where the block halves the size or changes the channel count,
    `downsample(x)` (a strided 1x1 convolution and a BatchNorm) so that the two can be added."""

    expansion = 1  # output channels per `channels` (Bottleneck's is 4)

    def __init__(self, in_channels: int, channels: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = conv3x3(in_channels, channels, stride)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(channels, channels)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)  # (B, channels, H/stride, W/stride)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """A stem (7x7 convolution, max pool), four stages of residual blocks, average pool, classifier."""

    def __init__(self, layers: tuple[int, int, int, int] = (2, 2, 2, 2), num_classes: int = 1000) -> None:
        super().__init__()
        self.in_channels = 64  # channels entering the next stage (grows as stages are built)
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(64, layers[0])
        self.layer2 = self._make_layer(128, layers[1], stride=2)
        self.layer3 = self._make_layer(256, layers[2], stride=2)
        self.layer4 = self._make_layer(512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * BasicBlock.expansion, num_classes)
        # torchvision's initialization: He-normal convolutions (fan out), BatchNorm as the identity
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def _make_layer(self, channels: int, blocks: int, stride: int = 1) -> nn.Sequential:
        """One stage: `blocks` BasicBlocks; the first may halve the size (stride 2) and change the
        channel count, so its shortcut needs a `downsample`."""
        downsample = None
        if stride != 1 or self.in_channels != channels * BasicBlock.expansion:
            downsample = nn.Sequential(conv1x1(self.in_channels, channels * BasicBlock.expansion, stride),
                                       nn.BatchNorm2d(channels * BasicBlock.expansion))
        layers = [BasicBlock(self.in_channels, channels, stride, downsample)]
        self.in_channels = channels * BasicBlock.expansion
        layers += [BasicBlock(self.in_channels, channels) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, 3, 224, 224)
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))  # (B, 64, 56, 56)
        x = self.layer1(x)  # (B, 64, 56, 56)
        x = self.layer2(x)  # (B, 128, 28, 28)
        x = self.layer3(x)  # (B, 256, 14, 14)
        x = self.layer4(x)  # (B, 512, 7, 7)
        x = torch.flatten(self.avgpool(x), 1)  # (B, 512)
        return self.fc(x)  # (B, num_classes)


def resnet18(num_classes: int = 1000) -> ResNet:
    """ResNet-18 with random weights: two BasicBlocks per stage (torchvision's `resnet18(weights=None)`)."""
    return ResNet((2, 2, 2, 2), num_classes)
