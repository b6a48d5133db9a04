"""One model, every compiler: inference and a training step, checked against eager, then timed.

    compilers(modes)     eager, minicompiler <mode> for each mode asked, then torch.compile <mode>
    bench_inference      the module in eval mode under torch.no_grad()
    bench_training       one step: zero_grad, forward, loss (the output weighted by fixed random
                         numbers, averaged), backward, optimizer step (SGD with momentum)

Every compiled variant is checked against eager first (outputs; in training the loss and every
parameter's gradient, from the same weights), then all variants are timed in turn, round by
round, so a noisy moment of a shared machine falls on all of them alike. The first call (which
compiles) is timed whole. A variant that fails to compile or run gets an error in its row.
"""

from __future__ import annotations

import copy
import functools
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from minicompiler.bench.timing import interleaved_seconds
from minicompiler.bench.zoo import Built, quiet_randomness

Compiler = Callable[[nn.Module], Callable]
# relative to the largest value compared. A training step's gradients through BatchNorm in train
# mode (which subtracts batch means) differ from eager's by up to a few percent in float32 rounding
# alone: torch.compile's do too (seed 003's CNN: 3.5% on conv2.weight); a real bug is off by O(1)
TOLERANCE = {"inference": 2e-3, "training": 5e-2}


def compilers(modes: list[str], torch_compile: bool = True) -> dict[str, Compiler]:
    import minicompiler

    chosen: dict[str, Compiler] = {"eager": lambda m: m}
    # minicompiler's first calls come before torch.compile's: Inductor leaves compile workers busy
    # after its own (on the H100 machine one at 100% of a core), and minicompiler's compile workers
    # then shared the cores with them (ResNet-18 b1's first training step: 26.0 s after torch.compile,
    # 9.6 s in a process without it). Its own workers have all finished when its first call returns.
    for mode in modes:
        chosen[f"minicompiler {mode}"] = lambda m, mode=mode: minicompiler.compile(m, mode=mode)
    if torch_compile:
        for mode in modes:
            chosen[f"torch.compile {mode}"] = lambda m, mode=mode: torch.compile(m, mode=mode)
    return chosen


def tensor_of(output: Any) -> torch.Tensor:
    """The tensor a model's output stands for (a Hugging Face output's hidden states, a tuple's first)."""
    if isinstance(output, torch.Tensor):
        return output
    for name in ("last_hidden_state", "logits"):
        if hasattr(output, name):
            return getattr(output, name)
    return tensor_of(output[0])


def relative_error(got: torch.Tensor, expected: torch.Tensor, floor: float = 1e-6) -> float:
    """Largest difference over the largest expected value (at least `floor`)."""
    scale = float(expected.detach().abs().max()) if expected.numel() else 0.0
    return float((got.detach().double() - expected.detach().double()).abs().max()) / max(scale, floor)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _first_call(fn: Callable[[], Any]) -> tuple[Any, float]:
    _sync()
    start = time.perf_counter()
    result = fn()
    _sync()
    return result, time.perf_counter() - start


def _reset_torch_compile() -> None:
    """Once per model, not per mode: a reset between modes would throw away the compiled code of
    the modes made before it, which would then compile again while being timed."""
    torch._dynamo.reset()


def _stop_inductor_workers() -> None:
    """Inductor keeps its compile workers after compiling; on the H100 machine one spins at 100%
    of a core, and every compiler timed after it (host-bound steps most: BERT's training step
    35.1 ms in the bench, 25.7 ms in a process without torch.compile) shares the cores with it.
    Stopped before timing; the next torch.compile starts them again."""
    if "torch._inductor.async_compile" in sys.modules:  # torch.compile has run in this process
        shutdown = getattr(sys.modules["torch._inductor.async_compile"], "shutdown_compile_workers", None)
        if shutdown is not None:
            shutdown()


Results = dict[str, dict[str, Any]]  # compiler -> its row: seconds, first call, error, report facts
Runnable = dict[str, tuple[Callable[[], Any], Any]]  # compiler -> (one call, the compiled object)


def bench_inference(built: Built, chosen: dict[str, Compiler], repeats: int) -> tuple[Results, Runnable]:
    module, inputs = built.module.eval(), built.inputs
    results: Results = {}
    runnable: Runnable = {}
    _reset_torch_compile()
    with torch.no_grad():
        expected = tensor_of(module(*inputs))
        exact = _exact_output(module, inputs)
        for name, compiler in chosen.items():
            try:
                compiled = compiler(module)
                output, seconds = _first_call(lambda compiled=compiled: compiled(*inputs))
                error = relative_error(tensor_of(output), expected)
            except Exception as failure:  # noqa: BLE001 - a benchmark records failures, it does not stop
                results[name] = {"error": _describe(failure)}
                continue
            row = {"first_call_s": seconds, "rel_err": error}
            correct = error <= TOLERANCE["inference"]
            if exact is not None:
                # cuDNN's convolutions round their operands to TF32 by default (torch's setting): on
                # an H100 eager's own output is 3.5e-3 off the float64 one for timm's MobileNetV3, and
                # a compiled one whose algorithms or layouts differ is off eager's by as much. It is
                # right when it is as close to exact as eager's (2.7e-6 from eager with TF32 off).
                row["rel_err_exact"] = relative_error(tensor_of(output), exact)
                correct = correct or row["rel_err_exact"] <= 2 * relative_error(expected, exact)
            results[name] = {**row, "correct": correct, **_report_facts(compiled)}
            runnable[name] = (lambda compiled=compiled: compiled(*inputs)), compiled
        _stop_inductor_workers()
        for name, seconds in interleaved_seconds({n: r[0] for n, r in runnable.items()}, repeats).items():
            results[name]["s"] = seconds
    return results, runnable


class _Step:
    """One compiler's training step on its own copy of the module (same starting weights)."""

    def __init__(self, module: nn.Module, compiler: Compiler, inputs: tuple[Any, ...]) -> None:
        self.module = copy.deepcopy(module).train()
        self.model = compiler(self.module)
        self.inputs = inputs
        self.optimizer = torch.optim.SGD(self.module.parameters(), lr=1e-4, momentum=0.9)

    def loss(self) -> torch.Tensor:
        """The output weighted by fixed random numbers, averaged. (Its mean square was the loss
        before: for a LayerNorm'd output, BERT's, that is 1 whatever the weights, and every
        gradient was rounding noise, which no comparison could check.)"""
        return self.loss_of(self.model(*self.inputs))

    def loss_of(self, result: Any) -> torch.Tensor:
        """The loss of one forward's result (its first tensor)."""
        output = tensor_of(result)
        output = output if output.dtype == torch.float64 else output.float()
        return (output * _probe(output.shape, output.dtype, output.device)).mean()

    def __call__(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.loss().backward()
        self.optimizer.step()

    def gradients(self) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
        """The loss and each parameter's gradient, from the weights as they are (no step taken)."""
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss()
        loss.backward()
        return loss, [p.grad for p in self.module.parameters()]


def bench_training(built: Built, chosen: dict[str, Compiler], repeats: int) -> tuple[Results, Runnable]:
    module = quiet_randomness(built.module)
    steps = {}
    results: Results = {}
    reference = _Step(module, chosen["eager"], built.inputs).gradients()
    exact = _exact_gradients(module, built.inputs)
    _reset_torch_compile()
    for name, compiler in chosen.items():
        try:
            step = _Step(module, compiler, built.inputs)
            (loss, grads), seconds = _first_call(step.gradients)
            error = step_error((loss, grads), reference)
            missing = sum((g is None) != (e is None) for g, e in zip(grads, reference[1], strict=True))
        except Exception as failure:  # noqa: BLE001
            results[name] = {"error": _describe(failure)}
            continue
        row: dict[str, Any] = {"first_call_s": seconds, "rel_err": error}
        correct = error <= TOLERANCE["training"]
        if exact is not None:
            # A deep network with batch norms in training mode amplifies float32 rounding: on an
            # H100 eager's own step is 0.16 (timm ResNet-50) to 0.96 (torchvision's) off the
            # float64 step. A compiled step is right when it is as close to exact as eager's.
            row["rel_err_exact"] = step_error((loss, grads), exact)
            correct = correct or row["rel_err_exact"] <= 2 * step_error(reference, exact)
        results[name] = {**row, "correct": correct and not missing, **_report_facts(step.model)}
        steps[name] = step
    _stop_inductor_workers()
    for name, seconds in interleaved_seconds(steps, repeats).items():
        results[name]["s"] = seconds
    return results, {name: (step, step.model) for name, step in steps.items()}


@functools.lru_cache(maxsize=8)
@functools.cache
def _probe(shape: torch.Size, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The loss's weights: the same numbers for every compiler and device (drawn on the CPU), drawn
    once. Drawn in every step, they were part of every timed step: a BERT output's 786,432 float64
    normal numbers, and a copy to the GPU that waited for the forward to finish."""
    return torch.randn(shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(device, dtype)


Gradients = tuple[torch.Tensor, list[torch.Tensor | None]]  # a step's loss and each parameter's gradient


def step_error(result: Gradients, reference: Gradients) -> float:
    """The largest relative difference of the loss or of any gradient. A gradient that is zero in
    exact arithmetic (a conv's bias before BatchNorm) is rounding noise in both: it is compared
    against the largest gradient of the model, not its own scale."""
    pairs = [(g, e) for g, e in zip(result[1], reference[1], strict=True) if e is not None and g is not None]
    floor = 1e-3 * max((float(e.abs().max()) for _, e in pairs if e.numel()), default=0.0)
    return max([relative_error(result[0], reference[0])] + [relative_error(g, e, floor) for g, e in pairs])


def _exact_output(module: nn.Module, inputs: tuple[Any, ...]) -> torch.Tensor | None:
    """Eager's output in float64, what float32 outputs are measured against; None if the model
    will not run in float64."""
    wide = tuple(x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)
    try:
        return tensor_of(copy.deepcopy(module).double()(*wide))
    except Exception:  # noqa: BLE001 - then correctness is judged against eager float32 alone
        return None


def _exact_gradients(module: nn.Module, inputs: tuple[Any, ...]) -> Gradients | None:
    """Eager's step in float64, what float32 steps are measured against; None if the model will
    not run in float64."""
    wide = tuple(x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)
    try:
        step = _Step(module, lambda m: m, wide)
        step.module.double()
        return step.gradients()
    except Exception:  # noqa: BLE001 - then correctness is judged against eager float32 alone
        return None


def _report_facts(compiled: Any) -> dict[str, Any]:
    """What minicompiler's report says about a compiled model: graphs, kernels, fallbacks."""
    reports = getattr(compiled, "reports", None)
    if not reports:
        return {}
    graphs = [g for r in reports for g in r.graphs]
    fallback = next((r.eager_fallback for r in reports if r.eager_fallback), None) or next(
        (g.fallback for g in graphs if g.fallback), None)
    return {"graphs": len(graphs), "graph_breaks": sum(len(r.graph_breaks) for r in reports),
            "kernels": sum(1 for g in graphs for k in g.kernels if k.kind != "alias"), "fallback": fallback}


def _describe(failure: Exception) -> str:
    where = traceback.extract_tb(failure.__traceback__)[-1]
    return f"{type(failure).__name__}: {str(failure)[:300]} ({where.filename.split('/')[-1]}:{where.lineno})"
