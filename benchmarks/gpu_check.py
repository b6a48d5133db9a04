"""Correctness of generated Triton on a real GPU: every benchmark workload, and compiled training.

    python benchmarks/gpu_check.py        # on a machine with CUDA; exits non-zero on a mismatch

CI has no GPU (it runs the Triton kernels through TRITON_INTERPRET=1); this script is what runs on
the lent H100. Each check compares with eager PyTorch on fresh random inputs.
"""

from __future__ import annotations

import copy
import sys

import torch
import torch.nn.functional as F

import minicompiler
from minicompiler.bench.models import MiniTransformer
from minicompiler.bench.timing import device_seconds, median_call_seconds
from minicompiler.bench.workloads import WORKLOADS, BiasGeluLayerNorm, SimpleModel

TOL = {"rtol": 1e-4, "atol": 1e-4}


def check_inference() -> list[str]:
    lines = []
    for workload in WORKLOADS:
        fn, args = workload.make("cuda")
        compiled = minicompiler.compile(fn)
        with torch.no_grad():
            for _ in range(2):
                args = tuple(torch.randn_like(a) if a.is_floating_point() else a for a in args)
                torch.testing.assert_close(compiled(*args), fn(*args), **TOL)
        report = compiled.report
        kernels = sum(len(g.kernels) for g in report.graphs)
        backends = {g.backend for g in report.graphs}
        lines.append(f"ok  {workload.name}: {kernels} kernel(s), backend {backends}, "
                     f"fallback {report.eager_fallback or [g.fallback for g in report.graphs if g.fallback]}")
    return lines


def check_training() -> list[str]:
    lines = []
    for name, model, shape in (("MLP", SimpleModel(), (64, 1024)), ("bias+GELU+LN", BiasGeluLayerNorm(), (512, 1024))):
        model = model.cuda()
        reference = copy.deepcopy(model)
        compiled = minicompiler.compile(model)
        x = torch.randn(shape, device="cuda")
        compiled(x).square().mean().backward()
        reference(x).square().mean().backward()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4)
        graph = compiled.report.graphs[0]
        lines.append(f"ok  training {name}: grads match eager; saved {graph.saved_tensors}; fallback {graph.fallback}")
    x = torch.rand(1 << 20, device="cuda") + 1
    x.requires_grad_()
    out = minicompiler.compile(lambda t: F.dropout(t, 0.25) * 2)(x)
    out.sum().backward()
    dropped = out == 0
    assert abs(dropped.float().mean().item() - 0.25) < 0.01
    torch.testing.assert_close(x.grad, torch.where(dropped, 0.0, 2 / 0.75), **TOL)
    lines.append("ok  dropout on CUDA: drop rate 0.25, backward reuses the mask")
    return lines


def check_cuda_graphs() -> list[str]:
    """mode="reduce-overhead": programs replayed from CUDA graphs give eager's results, new inputs
    are copied in, an input read in place that moves is noticed, outputs survive the next
    replay, and training works through both halves."""
    model = SimpleModel().cuda()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        xs = [torch.randn(64, 1024, device="cuda") for _ in range(3)]
        outs = [compiled(x) for x in xs]  # earlier outputs must not be overwritten by later replays
        for x, out in zip(xs, outs, strict=True):
            torch.testing.assert_close(out, reference(x), **TOL)
        # the same tensor twice: recorded reading it in place; then another tensor, and back
        fresh = minicompiler.compile(model, mode="reduce-overhead")
        same = xs[0]
        for x in (same, same, torch.randn(64, 1024, device="cuda"), same):
            torch.testing.assert_close(fresh(x), reference(x), **TOL)
    for _ in range(3):
        x = torch.randn(64, 1024, device="cuda")
        model.zero_grad()
        reference.zero_grad()
        compiled(x).square().mean().backward()
        reference(x).square().mean().backward()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4)
    return ["ok  reduce-overhead (CUDA graphs): inference and training match eager over 3 calls"]


def check_max_autotune() -> list[str]:
    """mode="max-autotune-no-cudagraphs": each workload's tuned kernels give eager's results; their
    GPU time (CUDA-graph replay, so kernels only) beside the default configs'. Then mode="max-autotune"
    (tuning plus CUDA graphs) trains a block with eager's gradients."""
    lines = []
    for workload in WORKLOADS:
        fn, args = workload.make("cuda")
        default, tuned = minicompiler.compile(fn), minicompiler.compile(fn, mode="max-autotune-no-cudagraphs")
        with torch.no_grad():
            torch.testing.assert_close(tuned(*args), fn(*args), **TOL)  # the first call tunes
            args = tuple(torch.randn_like(a) if a.is_floating_point() else a for a in args)
            torch.testing.assert_close(tuned(*args), fn(*args), **TOL)
            times = [device_seconds(f, args) * 1e3 for f in (default, tuned)]
        chosen = [note for g in tuned.report.graphs for stage in g.stages if stage.name.startswith("autotune")
                  for note in stage.notes]
        lines.append(f"ok  max-autotune {workload.name}: default {times[0]:.4f} ms, tuned {times[1]:.4f} ms "
                     f"(kernels only); {'; '.join(chosen)[:300]}")
    model = BiasGeluLayerNorm().cuda()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model, mode="max-autotune")
    for _ in range(4):
        x = torch.randn(512, 1024, device="cuda")
        for net, module in ((compiled, model), (reference, reference)):
            module.zero_grad()
            net(x).square().mean().backward()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-5)
    lines.append("ok  max-autotune (tuning + CUDA graphs): training steps' gradients match eager")
    return lines


def normalise(x: torch.Tensor) -> tuple[torch.Tensor, float]:
    s = x.abs().max().item()  # a graph break; s becomes a graph input after its first change
    return torch.cos(x) / s + (s * 2 - 1), -s


def check_float_inputs() -> list[str]:
    """A float from .item() read as a CUDA graph input: one recompile, then every value reuses it."""
    compiled = minicompiler.compile(normalise)
    for _ in range(4):
        x = torch.randn(4096, device="cuda")
        got, expected = compiled(x), normalise(x)
        torch.testing.assert_close(got[0], expected[0], **TOL)
        assert got[1] == expected[1]
    assert len(compiled.reports) == 2, [r.recompile_reason for r in compiled.reports]
    return [f"ok  float from .item() as a graph input on CUDA: {compiled.reports[1].dynamic[0]}"]


def check_autocast() -> list[str]:
    """torch.autocast("cuda", float16 / bfloat16) regions compile to Triton with eager's dtypes,
    for inference and training."""
    lines = []
    for dtype in (torch.float16, torch.bfloat16):
        model = BiasGeluLayerNorm().cuda()
        reference = copy.deepcopy(model)
        compiled = minicompiler.compile(model)
        x = torch.randn(512, 1024, device="cuda")
        with torch.autocast("cuda", dtype=dtype):
            got, expected = compiled(x), reference(x)
            got.float().square().mean().backward()
            expected.float().square().mean().backward()
        assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
        torch.testing.assert_close(got, expected, rtol=2e-2, atol=2e-2)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=5e-2, atol=5e-3)
        graph = compiled.report.graphs[0]
        assert graph.fallback is None and graph.variants, graph.fallback
        lines.append(f"ok  autocast cuda {dtype}: output {got.dtype}, grads match eager; {graph.variants[0].variant}")
    return lines


class DynamicShapeModel(torch.nn.Module):
    """Seed 003's model for its loop over sequence lengths (d_model 256, batch 16)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(256, 256)
        self.norm = torch.nn.LayerNorm(256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x))


def check_symbolic_sizes() -> list[str]:
    """dynamic=True: one graph with symbolic sizes, one Triton program for every sequence length
    of seed 003's loop (inference and training); kernel time per length from CUDA graph replays."""
    model = DynamicShapeModel().cuda()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model, dynamic=True)
    lines = []
    for length in (32, 64, 128, 256):
        x = torch.randn(16, length, 256, device="cuda")
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), reference(x), **TOL)
            kernel = [device_seconds(f, (x,)) * 1e3 for f in (compiled, reference)]
            call = [median_call_seconds(f, (x,)) * 1e3 for f in (compiled, reference)]
        lines.append(f"    length {length}: kernel time minicompiler {kernel[0]:.4f} ms, eager {kernel[1]:.4f} ms; "
                     f"per call {call[0]:.4f} ms, eager {call[1]:.4f} ms")
        model.zero_grad(), reference.zero_grad()
        compiled(x).square().mean().backward()
        reference(x).square().mean().backward()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4)
    assert len(compiled.reports) == 1, [r.recompile_reason for r in compiled.reports]
    guards = [line for line in compiled.report.dynamic if line.startswith("size guard")]
    return [f"ok  symbolic sizes on CUDA: 4 sequence lengths, 1 compilation, grads match eager; {guards}"] + lines \
        + [check_symbolic_transformer()]


def check_symbolic_transformer() -> str:
    """Seed 003's MiniTransformer (2 layers, d_model 64) trained over sequence lengths, dynamic=True."""
    torch.manual_seed(0)
    model = MiniTransformer(vocab_size=1000, d_model=64, num_heads=4, num_layers=2, d_ff=128).cuda().eval()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model, dynamic=True)
    for length in (32, 64, 128, 256):
        ids = torch.randint(0, 1000, (8, length), device="cuda")
        model.zero_grad(), reference.zero_grad()
        out, expected = compiled(ids), reference(ids)
        torch.testing.assert_close(out, expected, rtol=1e-3, atol=1e-4)
        out.square().sum().backward()
        expected.square().sum().backward()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-3)
    assert len(compiled.reports) == 1, [r.recompile_reason for r in compiled.reports]
    kernels = sum(len(g.kernels) for g in compiled.report.graphs)
    return (f"ok  symbolic MiniTransformer on CUDA: 4 sequence lengths trained, 1 compilation ({kernels} kernels), "
            "grads match")


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to check here (CI checks Triton through TRITON_INTERPRET=1)")
        return 0
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__}")
    failures = 0
    checks = (check_inference, check_training, check_cuda_graphs, check_max_autotune, check_float_inputs,
              check_autocast, check_symbolic_sizes)
    for check in checks:
        try:
            print("\n".join(check()))
        except Exception as error:  # report every check, then fail
            failures += 1
            print(f"FAIL {check.__name__}: {type(error).__name__}: {error}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
