"""Guards pass for calls that look like the captured one and fail for anything that changed."""

from __future__ import annotations

import torch
from torch import nn

from minicompiler.capture import capture, first_failing_guard

THRESHOLD = 0.5


def thresholded(x):
    return torch.relu(x - THRESHOLD)


def failing(result, *args, **kwargs):
    return first_failing_guard(result.guards, args, kwargs)


def test_tensor_guard_checks_exact_metadata() -> None:
    result = capture(thresholded, (torch.randn(4, 8),), {})
    assert failing(result, torch.randn(4, 8)) is None
    assert failing(result, torch.randn(4, 9)).kind == "tensor"  # shape
    assert failing(result, torch.randn(4, 8, dtype=torch.float64)).kind == "tensor"  # dtype
    assert failing(result, torch.randn(8, 4).t()).kind == "tensor"  # same shape, other strides
    assert failing(result, torch.randn(4, 8, requires_grad=True)).kind == "tensor"
    assert failing(result, torch.randn(4, 8, device="meta")).kind == "tensor"  # device
    assert failing(result, 3.0).kind == "tensor"  # not a tensor at all
    assert failing(result).kind == "tensor"  # argument missing


def test_tensor_guard_text() -> None:
    result = capture(thresholded, (torch.randn(1024),), {})
    tensor_guard = next(g for g in result.guards if g.kind == "tensor")
    assert str(tensor_guard) == "x: float32[1024] contiguous cpu requires_grad=False"
    assert tensor_guard.source == "args[0]"


def test_global_value_guard() -> None:
    global THRESHOLD
    x = torch.randn(3)
    result = capture(thresholded, (x,), {})
    assert failing(result, x) is None
    THRESHOLD = 0.25
    try:
        guard = failing(result, x)
        assert guard.kind == "constant" and guard.source == "globals()['THRESHOLD']"
    finally:
        THRESHOLD = 0.5


def test_python_number_arguments_are_guarded_by_value() -> None:
    result = capture(lambda x, n: x * n, (torch.randn(2), 3), {})
    assert failing(result, torch.randn(2), 3) is None
    assert failing(result, torch.randn(2), 4).kind == "constant"
    assert failing(result, torch.randn(2), 3.0).kind == "constant"  # int vs float is a different graph


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
        self.scale = 2.0

    def forward(self, x):
        return self.layers(x) * self.scale


def test_module_attribute_training_flag_and_identity_guards() -> None:
    net = Net().eval()
    x = torch.randn(2, 4)
    result = capture(net, (x,), {})
    assert failing(result, x) is None
    kinds = {(g.kind, g.source) for g in result.guards}
    assert ("id", "self.layers") in kinds and ("constant", "self.training") in kinds

    net.scale = 3.0
    assert failing(result, x).source == "self.scale"
    net.scale = 2.0

    net.train()
    assert failing(result, x).source.endswith("training")
    net.eval()

    net.layers = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    assert failing(result, x).kind == "id"


def test_parameter_shape_change_fails() -> None:
    net = nn.Linear(4, 4)
    x = torch.randn(2, 4)
    result = capture(net, (x,), {})
    net.weight = nn.Parameter(torch.randn(4, 4, dtype=torch.float64))
    assert failing(result, x).source == "self.weight"


def test_container_arguments_guard_type_and_length() -> None:
    result = capture(lambda xs: xs[0] + xs[1], ([torch.randn(2), torch.randn(2)],), {})
    assert failing(result, [torch.randn(2), torch.randn(2)]) is None
    assert failing(result, [torch.randn(2)] * 3).kind == "len"
    assert failing(result, (torch.randn(2), torch.randn(2))).kind == "type"


def test_guard_checks_are_cheap() -> None:
    import time

    x = torch.randn(8)
    result = capture(thresholded, (x,), {})
    start = time.perf_counter()
    for _ in range(1000):
        assert all(g.check((x,), {}) for g in result.guards)
    assert time.perf_counter() - start < 0.5  # well under a millisecond per call
