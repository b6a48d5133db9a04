"""Run one generated program eagerly and compiled, forward and backward, and compare."""

from __future__ import annotations

import torch
from fuzz_programs import Program

import minicompiler


def _outputs(value) -> list[torch.Tensor]:
    return list(value) if isinstance(value, tuple) else [value]


def _close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, eager {expected.dtype}"
    # float32 sums may be reassociated; half types round each step (eager may keep float32 between)
    tol = {torch.float32: {"rtol": 1e-4, "atol": 1e-5}, torch.float16: {"rtol": 1e-2, "atol": 1e-2},
           torch.bfloat16: {"rtol": 5e-2, "atol": 5e-2}}.get(expected.dtype, {})
    torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{what}: {m}", **tol)


def check(program: Program, backend: str = "cpp") -> None:
    """Raise AssertionError (with the program's source) where compiled and eager differ."""
    fn = program.function()
    grad = program.differentiable

    def leaves() -> list[torch.Tensor]:
        return [x.detach().requires_grad_(grad) for x in program.inputs]

    eager_in, compiled_in = leaves(), leaves()
    expected = _outputs(fn(*eager_in))
    actual = _outputs(minicompiler.compile(fn, backend=backend)(*compiled_in))
    header = (f"seed {program.seed} (replay: FUZZ_SEED={program.seed}; for test_regressions.py once fixed:\n"
              f"{program}):\n{program.source}")
    assert len(actual) == len(expected), header
    for i, (a, e) in enumerate(zip(actual, expected, strict=False)):
        _close(a.detach(), e.detach(), f"{header}output {i}")
    if not grad or not any(e.requires_grad for e in expected):
        return
    loss_e = sum((e * torch.linspace(0.5, 1.5, e.numel()).view(e.shape)).sum() for e in expected if e.requires_grad)
    loss_a = sum((a * torch.linspace(0.5, 1.5, a.numel()).view(a.shape)).sum() for a in actual if a.requires_grad)
    grads_e = torch.autograd.grad(loss_e, eager_in, allow_unused=True)
    # compiled outputs may need no gradient where eager's would be all zeros (copysign's sign)
    differentiable = any(a.requires_grad for a in actual)
    grads_a = torch.autograd.grad(loss_a, compiled_in, allow_unused=True) if differentiable else [None] * len(eager_in)
    for i, (ga, ge) in enumerate(zip(grads_a, grads_e, strict=False)):
        if ge is None:
            continue
        if ga is None:
            assert not ge.any(), f"{header}gradient {i} missing"
            continue
        _close(ga, ge, f"{header}gradient {i}")
