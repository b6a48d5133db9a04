"""torch.compile(fn, backend="minicompiler"): the `torch_dynamo_backends` entry point (pyproject.toml)
makes minicompiler a named backend once installed; its mode/options, list_backends, module.compile."""

import pytest
import torch
from torch import nn

import minicompiler
from minicompiler import dynamo_backend


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    dynamo_backend.REPORTS.clear()
    yield
    torch._dynamo.reset()


def test_minicompiler_is_a_named_torch_compile_backend():
    assert "minicompiler" in torch._dynamo.list_backends()
    assert minicompiler.list_backends() == ["auto", "cpp", "triton", "eager"]


def test_backend_by_name_compiles_with_our_compiler_and_matches_eager():
    def fn(x, y):
        return torch.relu(x * y + 1.0).sum(dim=1)

    compiled = torch.compile(fn, backend="minicompiler")
    for _ in range(2):
        x, y = torch.randn(8, 16), torch.randn(8, 16)
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    report = dynamo_backend.REPORTS[-1]
    assert report.frontend == "dynamo" and report.eager_fallback is None
    assert report.graphs[0].backend == "cpp" and report.graphs[0].kernels


def test_options_choose_the_code_generator_and_bad_ones_fail():
    def fn(x):
        return torch.cos(x) * 2

    compiled = torch.compile(fn, backend="minicompiler", options={"backend": "eager"})
    x = torch.randn(32)
    torch.testing.assert_close(compiled(x), fn(x))
    assert dynamo_backend.REPORTS[-1].graphs[0].backend == "eager"
    with pytest.raises(Exception, match="unknown option"):
        torch.compile(fn, backend="minicompiler", options={"no_such_option": 1})(x)


class TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def test_module_compile_method_with_our_backend_matches_eager():
    torch.manual_seed(0)
    model = TwoLayers()
    x = torch.randn(4, 8)
    expected = model(x)
    model.compile(backend=minicompiler.backend)
    torch.testing.assert_close(model(x), expected)
    assert len(dynamo_backend.REPORTS) == 1 and dynamo_backend.REPORTS[0].eager_fallback is None
    model.compile(backend="minicompiler")
    torch.testing.assert_close(model(x), expected)
