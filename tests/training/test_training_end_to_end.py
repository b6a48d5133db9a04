"""Compiled training through the whole pipeline: capture -> decompose -> autograd -> fuse -> C++.

Every test compares with eager PyTorch on fresh random inputs: outputs, input and parameter
gradients, optimizer trajectories, and the bytes autograd saves between forward and backward.
Tolerances: float32, rtol=atol=1e-4 (fused kernels sum in a different order than eager's).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minicompiler
from minicompiler.report import CompileReport

TOL = {"rtol": 1e-4, "atol": 1e-4}


def saved_bytes(fn, *args) -> int:
    """Bytes autograd keeps for the backward while running fn(*args) (its saved tensors)."""
    total = 0

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += tensor.numel() * tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return total


def gradients_of(module: nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() for p in module.parameters()]


class MLP(nn.Module):  # seed 000's model, narrower so the test is quick
    def __init__(self, width: int = 64):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class GeluLayerNorm(nn.Module):
    def __init__(self, width: int = 256):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(width))
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(F.gelu(x + self.bias))


def cos_cos(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(torch.cos(x))


def test_cos_cos_gradient_and_the_recomputing_partitioner_saves_only_x() -> None:
    compiled = minicompiler.compile(cos_cos, backend="cpp")
    for _ in range(2):
        x = torch.randn(10_000, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        torch.testing.assert_close(compiled(x), cos_cos(x_eager), **TOL)
        compiled(x).sum().backward()
        cos_cos(x_eager).sum().backward()
        torch.testing.assert_close(x.grad, x_eager.grad, **TOL)
    graph = compiled.report.graphs[0]
    assert graph.fallback is None
    assert graph.saved_tensors == ["x: float32[10000]"]
    assert [s.name for s in graph.autograd] == ["joint", "forward", "backward"]
    x = torch.randn(10_000, requires_grad=True)
    assert saved_bytes(compiled, x) < saved_bytes(cos_cos, x)  # eager also saves cos(x)


def test_gelu_layer_norm_block_saves_less_than_eager() -> None:
    block = GeluLayerNorm()
    compiled = minicompiler.compile(block, backend="cpp")
    x = torch.randn(64, 256, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_()
    reference = copy.deepcopy(block)
    compiled(x).square().sum().backward()
    reference(x_eager).square().sum().backward()
    torch.testing.assert_close(x.grad, x_eager.grad, **TOL)
    for got, expected in zip(gradients_of(block), gradients_of(reference), strict=True):
        torch.testing.assert_close(got, expected, **TOL)
    assert compiled.report.graphs[0].fallback is None
    assert saved_bytes(compiled, x) < saved_bytes(reference, x)


def test_inputs_that_need_no_gradient_get_none_and_no_grad_calls_skip_the_joint_graph() -> None:
    model = MLP()
    compiled = minicompiler.compile(model, backend="cpp")
    x = torch.randn(8, 64)  # data: no gradient
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), **TOL)
    graph = compiled.report.graphs[0]
    assert graph.autograd == [] and any(s.name == "codegen" for s in graph.stages)
    out = compiled(x)  # grad mode: now the training program is built, for the parameters only
    out.sum().backward()
    assert x.grad is None and all(p.grad is not None for p in model.parameters())
    assert len(compiled.reports) == 1  # the same compiled entry serves both


def two_outputs(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h = x @ w
    return torch.tanh(h), h.square().sum(-1)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_a_loss_on_one_output_alone_gets_eager_gradients(backend: str) -> None:
    # the other output's gradient never arrives (autograd is told not to fill zeros for it)
    compiled = minicompiler.compile(two_outputs, backend=backend)
    for use in (0, 1, 0):
        x = torch.randn(6, 5, requires_grad=True)
        w = torch.randn(5, 4, requires_grad=True)
        mine = torch.autograd.grad(compiled(x, w)[use].sum(), (x, w))
        theirs = torch.autograd.grad(two_outputs(x, w)[use].sum(), (x, w))
        for a, b in zip(mine, theirs, strict=True):
            torch.testing.assert_close(a, b, **TOL)


def test_adam_training_loop_matches_eager_losses_without_recompiling() -> None:
    torch.manual_seed(0)
    eager_model = MLP()
    model = copy.deepcopy(eager_model)
    compiled = minicompiler.compile(model, backend="cpp")
    optimizers = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (eager_model, model)]
    data = [(torch.randn(16, 64), torch.randint(0, 10, (16,)))] * 5  # one batch: the loss must fall
    losses: dict[str, list[float]] = {"eager": [], "compiled": []}
    for (x, target) in data:
        for name, run, optimizer in (("eager", eager_model, optimizers[0]), ("compiled", compiled, optimizers[1])):
            optimizer.zero_grad()
            loss = F.cross_entropy(run(x), target)
            loss.backward()
            optimizer.step()
            losses[name].append(loss.item())
    torch.testing.assert_close(losses["compiled"], losses["eager"], rtol=1e-4, atol=1e-4)
    assert losses["compiled"][-1] < losses["compiled"][0]
    assert len(compiled.reports) == 1, [r.recompile_reason for r in compiled.reports]


def test_dropout_matches_eager_in_distribution_and_its_backward_reuses_the_mask() -> None:
    dropout = nn.Dropout(p=0.25)
    compiled = minicompiler.compile(lambda x: dropout(x) * 3, backend="cpp")
    x = torch.rand(200_000) + 1.0  # never zero, so a zero output means a dropped element
    x.requires_grad_()
    out = compiled(x)
    dropped = out == 0
    assert abs(dropped.float().mean().item() - 0.25) < 0.01
    torch.testing.assert_close(out[~dropped], x[~dropped].detach() * 3 / 0.75, **TOL)
    out.sum().backward()
    # the gradient is zero exactly where the forward dropped, 3 / (1 - p) elsewhere
    expected = torch.where(dropped, 0.0, 3 / 0.75)
    torch.testing.assert_close(x.grad, expected, **TOL)
    dropout.eval()  # eval mode is a guarded recompile, and dropout is then the identity
    torch.testing.assert_close(compiled(x), x * 3, **TOL)


def test_batch_norm_in_training_updates_running_statistics_exactly_as_eager() -> None:
    model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU())
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model, backend="cpp")
    for _ in range(3):
        x = torch.randn(8, 16)
        torch.testing.assert_close(compiled(x), reference(x), **TOL)
    bn, bn_ref = model[1], reference[1]
    torch.testing.assert_close(bn.running_mean, bn_ref.running_mean, **TOL)
    torch.testing.assert_close(bn.running_var, bn_ref.running_var, **TOL)
    assert bn.num_batches_tracked.item() == bn_ref.num_batches_tracked.item() == 3


def autocast_block() -> nn.Module:
    """Ops from each of autocast's lists: linear (low precision), GELU and LayerNorm (float32 on
    some devices), softmax; the dtypes eager picks differ between them."""
    return nn.Sequential(nn.Linear(64, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 10), nn.Softmax(-1))


@pytest.mark.parametrize("backend", ["cpp", "triton"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_regions_compile_with_eager_dtypes(dtype: torch.dtype, backend: str) -> None:
    torch.manual_seed(0)
    model = autocast_block()
    if torch.empty(0).device.type != "cpu":  # tests.triton_on_gpu makes CUDA the default device
        pytest.skip("CPU autocast's op lists: under CUDA's, softmax stays float32")
    compiled = minicompiler.compile(model, backend=backend)
    for _ in range(2):  # fresh inputs; the second call reuses the autocast graph
        x = torch.randn(8, 64)
        with torch.autocast("cpu", dtype=dtype), torch.no_grad():
            expected, got = model(x), compiled(x)
        assert got.dtype == expected.dtype == dtype
        torch.testing.assert_close(got, expected, rtol=2e-2, atol=2e-2)
    graph = compiled.report.graphs[0]
    assert graph.fallback is None and len(compiled.reports) == 1
    [variant] = graph.variants
    assert variant.variant.startswith(f"torch.autocast('cpu', dtype={dtype})") and variant.kernels
    assert "convert" in variant.stages[0].text  # the casts autocast makes, written into the graph
    assert "compiled for torch.autocast" in compiled.report.to_text()
    assert "also compiled for torch.autocast" in compiled.report._repr_html_()
    assert CompileReport.from_json(compiled.report.to_json()).graphs[0].variants[0].variant == variant.variant
    torch.testing.assert_close(compiled(x), model(x), **TOL)  # outside the region: float32 again


def test_training_inside_autocast_matches_eager_gradients() -> None:
    torch.manual_seed(0)
    model = autocast_block()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model, backend="cpp")
    x = torch.randn(8, 64)
    for run in (reference, compiled):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = run(x).float().square().sum()
        loss.backward()
    for got, expected in zip(gradients_of(model), gradients_of(reference), strict=True):
        assert got.dtype == expected.dtype == torch.float32
        torch.testing.assert_close(got, expected, rtol=5e-2, atol=5e-3)
    assert compiled.report.graphs[0].variants[0].saved_tensors  # the compiled training program ran


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_attention_training_under_cuda_autocast_float16() -> None:
    """CUDA autocast runs softmax in float32 and casts it back to float16 for the next matmul.
    Inferring that matmul's dtype with autocast still on saw float16 (fake CUDA tensors get
    autocast's casts too), so no cast was written and the generated program's matmul got float32
    and float16 (seed 003's MiniTransformer with AMP, notebook 11 on the H100)."""
    from minicompiler.bench.models import MiniTransformer

    torch.manual_seed(0)
    model = MiniTransformer(100, 64, 4, 2, 128, max_seq_len=64, dropout=0.0).cuda()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model)
    ids = torch.randint(0, 100, (2, 16), device="cuda")
    outputs = []
    for run in (reference, compiled):
        with torch.autocast("cuda", dtype=torch.float16):
            outputs.append(run(ids))
            loss = outputs[-1].float().square().mean()
        loss.backward()
    assert outputs[0].dtype == outputs[1].dtype == torch.float16
    torch.testing.assert_close(outputs[1], outputs[0], rtol=2e-2, atol=2e-2)
    for got, expected in zip(gradients_of(model), gradients_of(reference), strict=True):
        torch.testing.assert_close(got, expected, rtol=5e-2, atol=5e-3)


@pytest.mark.parametrize("make", ["new_tensor", "new_zeros", "new_ones", "new_full", "new_empty"])
def test_tensors_made_from_an_input_carry_no_gradient_back(make: str) -> None:
    """x.new_tensor(...) and its kin run in torch (an extern call that reads x); the backward once
    asked torch for a gradient through them and crashed: they carry none."""
    args = {"new_tensor": ([1.0, 2.0, 3.0],), "new_full": ((3,), 2.0)}.get(make, ((3,),))

    def fn(x):
        made = getattr(x, make)(*args)
        return x * (made if make != "new_empty" else made.fill_(2.0)).exp()

    x = torch.randn(3, requires_grad=True)
    (expected,) = torch.autograd.grad(fn(x).sum(), x)
    x = x.detach().requires_grad_()
    (actual,) = torch.autograd.grad(minicompiler.compile(fn)(x).sum(), x)
    torch.testing.assert_close(actual, expected)
