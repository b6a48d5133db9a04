"""minicompiler.backend: TorchDynamo captures, minicompiler compiles (torch.compile(fn, backend=...)).

Every test compares with eager on fresh random inputs and checks the reports the backend made:
captured by "dynamo", compiled to kernels.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

import minicompiler
from minicompiler import dynamo_backend


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    dynamo_backend.REPORTS.clear()
    yield
    torch._dynamo.reset()


def compare_with_eager(fn, make_args, calls: int = 2):
    compiled = torch.compile(fn, backend=minicompiler.backend)
    for _ in range(calls):
        args = make_args()
        torch.testing.assert_close(compiled(*args), fn(*args))


def assert_compiled_by_us(report: minicompiler.CompileReport) -> None:
    assert report.frontend == "dynamo"
    assert report.eager_fallback is None and report.graphs[0].fallback is None
    assert report.graphs[0].kernels


def test_cos_cos_is_one_fused_kernel():
    compare_with_eager(lambda x: torch.cos(torch.cos(x)), lambda: (torch.randn(1000),))
    (report,) = dynamo_backend.REPORTS
    assert_compiled_by_us(report)
    assert [k.kind for k in report.graphs[0].kernels] == ["pointwise"]
    assert report.function == "<lambda>" and report.filename == __file__


def test_mlp_forward_and_gradients():
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    compiled = torch.compile(model, backend=minicompiler.backend)
    with torch.no_grad():
        x = torch.randn(8, 16)
        torch.testing.assert_close(compiled(x), model(x))
    x = torch.randn(8, 16)
    compiled(x).square().sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).square().sum().backward()
    for grad, param in zip(got, model.parameters(), strict=True):
        torch.testing.assert_close(grad, param.grad)
    assert len(dynamo_backend.REPORTS) == 2  # Dynamo guards on grad mode: one graph each
    for report in dynamo_backend.REPORTS:
        assert_compiled_by_us(report)
        assert "linear" in report.graphs[0].stage("capture").text


def test_softmax_and_a_slice():
    def fn(x):
        return torch.softmax(x, dim=-1)[:, 1:] + F.softmax(x * 2, dim=0)[:, :-1]

    compare_with_eager(fn, lambda: (torch.randn(6, 10),))
    (report,) = dynamo_backend.REPORTS
    assert_compiled_by_us(report)
    assert report.graphs[0].stage("capture").text.count("ops.softmax") == 2


def test_a_print_breaks_the_graph_and_both_parts_compile(capsys):
    def fn(x):
        y = torch.cos(x) * 2
        print("between graphs")
        return torch.sin(y) + x

    compare_with_eager(fn, lambda: (torch.randn(64),))
    assert capsys.readouterr().out.count("between graphs") == 4  # once per call: 2 compiled, 2 eager
    assert len(dynamo_backend.REPORTS) == 2
    for report in dynamo_backend.REPORTS:
        assert_compiled_by_us(report)


def test_new_shapes_specialize_again_with_a_reason():
    compare_with_eager(lambda x: (x * x.sum(-1, keepdim=True)).relu(),
                       iter([(torch.randn(n, 8),) for n in (3, 5, 7)]).__next__, calls=3)
    # Dynamo compiles the 3-row graph static, then one graph with a symbolic size for the others,
    # which minicompiler specializes to each size it is called with
    first, *others = dynamo_backend.REPORTS
    assert first.recompile_reason is None and len(others) == 2
    assert "s" in others[0].graphs[0].guards[0] and "== 5" in others[0].graphs[0].guards[0]
    assert "input signature changed" in others[1].recompile_reason


def test_an_untranslatable_node_runs_eagerly_with_a_warning():
    def fn(x):
        y = x * 2
        y.add_(1)  # in place: the IR has no place for it
        return y.cos()

    compiled = torch.compile(fn, backend=minicompiler.backend)
    x = torch.randn(10)
    with pytest.warns(UserWarning, match="add_"):
        torch.testing.assert_close(compiled(x), fn(x))
    x = torch.randn(10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # it warned once, when it gave up
        torch.testing.assert_close(compiled(x), fn(x))
    (report,) = dynamo_backend.REPORTS  # one report, saying why
    assert report.frontend == "dynamo" and "add_" in report.eager_fallback and report.graphs == []


def test_an_aten_graph_maps_to_the_same_ops():
    def fn(x, w):
        return torch.relu(x @ w).sum(dim=1) - x.mean()

    x, w = torch.randn(4, 8), torch.randn(8, 3)
    gm = make_fx(fn)(x, w)
    compiled = minicompiler.backend(gm, [x, w])
    for _ in range(2):
        x, w = torch.randn(4, 8), torch.randn(8, 3)
        torch.testing.assert_close(compiled(x, w), fn(x, w))
    captured = compiled.reports[0].graphs[0].stage("capture").text
    assert "torch_call" not in captured and "ops.relu" in captured


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.randn(5))

    def forward(self, x):
        return torch.exp(x) * self.scale


def test_get_attr_tensors_become_inputs():
    model = Scaled()
    gm = torch.fx.symbolic_trace(model)
    assert any(node.op == "get_attr" for node in gm.graph.nodes)
    x = torch.randn(3, 5)
    compiled = minicompiler.backend(gm, [x])
    torch.testing.assert_close(compiled(x), model(x))
    model.scale.mul_(3)  # the same buffer, new values: read on every call
    x = torch.randn(3, 5)
    torch.testing.assert_close(compiled(x), model(x))


def test_compilations_are_logged_with_their_frontend(capsys):
    minicompiler.set_logs(graph=True, output_code=True)
    try:
        compare_with_eager(lambda x: torch.tanh(x) * 3, lambda: (torch.randn(32),), calls=1)
    finally:
        minicompiler.set_logs()
    (report,) = dynamo_backend.REPORTS
    err = capsys.readouterr().err
    assert "[minicompiler.graph] ===== graph 0 of <lambda> (captured by dynamo) =====" in err
    assert f"[minicompiler.output_code] {report.graphs[0].kernels[0].code.splitlines()[0]}" in err
