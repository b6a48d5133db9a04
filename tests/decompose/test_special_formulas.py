"""Value tests, special functions, shrinkers, reductions and losses written as formulas of primitives
(decompose/special.py, reductions.py, losses.py): each compiled to generated kernels only (no extern
call), vs eager, on C++ over dtypes and on Triton (TRITON_INTERPRET=1), with NaN, inf and 0 among
the inputs; gradients in float64."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

import minicompiler

BACKENDS = ["cpp"] + (["triton"] if os.environ.get("TRITON_INTERPRET") == "1" else [])
SPECIAL = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 0.25, -0.5, 1.0, 3.0])


def _values(dtype: torch.dtype, shape: tuple[int, ...] = (4, 9), special: bool = True) -> torch.Tensor:
    x = torch.randn(shape, dtype=torch.float64) * 2
    if special and shape[-1] >= len(SPECIAL):  # one row of NaN, inf, -inf, 0, -0, ...
        x[0, : len(SPECIAL)] = SPECIAL.to(torch.float64)
    return x.to(dtype) if dtype.is_floating_point else x.round().to(dtype)


def _probabilities(dtype: torch.dtype, shape: tuple[int, ...] = (4, 9)) -> torch.Tensor:
    return torch.rand(shape, dtype=torch.float64).clamp(0.01, 0.99).to(dtype)


# name -> (function, how to make its arguments from a dtype)
UNARY = {
    "isnan": torch.isnan, "isinf": torch.isinf, "isposinf": torch.isposinf, "isneginf": torch.isneginf,
    "isfinite": torch.isfinite, "sinc": torch.sinc, "entr": torch.special.entr, "nan_to_num": torch.nan_to_num,
    "nan_to_num_args": lambda x: torch.nan_to_num(x, 1.5, 100.0, -7.0), "logsigmoid": F.logsigmoid,
    "tanhshrink": F.tanhshrink, "hardshrink": lambda x: F.hardshrink(x, 0.3), "softshrink": F.softshrink,
    "threshold": lambda x: F.threshold(x, 0.1, -2.0), "positive": torch.positive, "sgn": torch.sgn,
    "rsub": lambda x: torch.rsub(x, 2.0, alpha=3), "logsumexp": lambda x: torch.logsumexp(x, 1),
    "logsumexp_all": lambda x: torch.logsumexp(x, (0, 1), keepdim=True), "any": lambda x: torch.any(x, 1),
    "all": torch.all, "count_nonzero": lambda x: torch.count_nonzero(x, 0), "nansum": lambda x: torch.nansum(x, 1),
    "nanmean": lambda x: torch.nanmean(x, 1, keepdim=True), "softmin": lambda x: F.softmin(x, 1),
    "softplus_beta": lambda x: F.softplus(x, 2.0, 1.5), "ndtr": torch.special.ndtr,
}
FINITE = {  # unary ops compared on finite inputs: a norm or a loss of inf is inf either way
    "norm2": lambda x: torch.linalg.vector_norm(x, dim=1), "norm_inf": lambda x: torch.norm(x, float("inf")),
    "norm_3": lambda x: torch.linalg.vector_norm(x, 3, dim=0, keepdim=True), "norm_0": lambda x: x.norm(0),
    "norm_1": lambda x: torch.linalg.norm(x, 1, dim=1), "normalize": F.normalize,
    "rms_norm": lambda x: F.rms_norm(x, (9,)), "rms_norm_weight": lambda x: F.rms_norm(x, (4, 9), x.abs() + 1, 1e-3),
    "glu": lambda x: F.glu(x[:, :8]), "glu_rows": lambda x: F.glu(x, 0),
}
BINARY = {
    "xlogy": torch.xlogy, "xlog1py": torch.special.xlog1py, "heaviside": torch.heaviside, "fmax": torch.fmax,
    "fmin": torch.fmin, "logaddexp": torch.logaddexp, "logaddexp2": torch.logaddexp2,
    "float_power": torch.float_power, "dist": torch.dist, "pairwise_distance": F.pairwise_distance,
    "addcdiv": lambda x, y: torch.addcdiv(x, x, y, value=0.5), "ldexp": torch.ldexp,
    "outer": lambda x, y: torch.outer(x[1], y[0]),
}
LOSSES = {
    "mse_loss": F.mse_loss, "l1_loss": lambda x, y: F.l1_loss(x, y, reduction="sum"),
    "smooth_l1_loss": lambda x, y: F.smooth_l1_loss(x, y, beta=0.5), "huber_loss": F.huber_loss,
    "soft_margin_loss": lambda x, y: F.soft_margin_loss(x, y.sign()),
    "kl_div": lambda x, y: F.kl_div(x, y, reduction="batchmean"),
    "kl_div_log": lambda x, y: F.kl_div(x, y.log(), reduction="none", log_target=True),
    "hinge_embedding_loss": lambda x, y: F.hinge_embedding_loss(x, torch.where(y > 0.5, 1.0, -1.0)),
    "poisson_nll_loss": F.poisson_nll_loss, "bce_with_logits": F.binary_cross_entropy_with_logits,
    "bce_with_logits_pos": lambda x, y: F.binary_cross_entropy_with_logits(x, y, pos_weight=torch.full((9,), 2.0)),
}
PROBABILITY_LOSSES = {  # both arguments probabilities
    "binary_cross_entropy": F.binary_cross_entropy,
    "margin_ranking_loss": lambda x, y: F.margin_ranking_loss(x, y, (x - 0.5).sign(), margin=0.1),
}
FLOAT_ONLY = {"sinc", "entr", "logsigmoid", "tanhshrink", "hardshrink", "softshrink", "threshold", "logsumexp",
              "logsumexp_all", "nansum", "xlogy", "xlog1py", "fmax", "fmin", "logaddexp", "logaddexp2", "dist",
              "pairwise_distance", "nanmean", "softmin", "softplus_beta", "addcdiv", "rms_norm", "rms_norm_weight",
              "glu", "glu_rows"}
CASES = {**UNARY, **FINITE, **BINARY, **LOSSES, **PROBABILITY_LOSSES}


def _arguments(name: str, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    if name in PROBABILITY_LOSSES:
        return _probabilities(dtype), _probabilities(dtype)
    if name in LOSSES:
        return _values(dtype, special=False), _probabilities(dtype)
    if name in BINARY:  # the second broadcast along rows; NaN/inf in both
        second = _values(dtype, (1, 9)).flip(1)
        return _values(dtype, special=name not in ("dist", "pairwise_distance")), second
    return (_values(dtype, special=name not in FINITE),)


def _check(name: str, dtype: torch.dtype, backend: str) -> None:
    fn, args = CASES[name], _arguments(name, dtype)
    compiled = minicompiler.compile(lambda *a: fn(*a), backend=backend)
    expected, actual = fn(*args), compiled(*args)
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype in (torch.float16, torch.bfloat16) else {}
    torch.testing.assert_close(actual, expected, equal_nan=True, **tol)
    kinds = {k.kind for g in compiled.report.graphs for k in g.kernels}
    assert "extern" not in kinds, kinds
    identity = name == "positive" or (name.startswith("nan_to_num") and not dtype.is_floating_point)
    assert kinds or identity, "nothing was generated"


COMBOS = ([("cpp", d) for d in (torch.float32, torch.float64, torch.float16)]
          + [(b, torch.float32) for b in BACKENDS[1:]])


@pytest.mark.parametrize(("backend", "dtype"), COMBOS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_formula_matches_eager(name: str, backend: str, dtype: torch.dtype) -> None:
    _check(name, dtype, backend)


@pytest.mark.parametrize("name", sorted(set(UNARY) - FLOAT_ONLY - {"rsub"}))
def test_integer_inputs(name: str) -> None:
    _check(name, torch.int32, "cpp")


@pytest.mark.parametrize("name", ["softmin", "softplus_beta", "ndtr", "addcdiv", "ldexp",
                                  "sinc", "logsigmoid", "logsumexp", "norm2", "norm_3", "normalize", "xlogy",
                                  "logaddexp", "mse_loss", "smooth_l1_loss", "bce_with_logits", "kl_div",
                                  "binary_cross_entropy", "softshrink", "rms_norm_weight", "glu", "outer"])
def test_formula_gradient(name: str) -> None:
    fn = CASES[name]
    args = [a.detach().requires_grad_() for a in _arguments(name, torch.float64)]
    if name not in LOSSES and name not in PROBABILITY_LOSSES:
        args = [a.nan_to_num(0.0, 3.0, -3.0).detach().requires_grad_() for a in args]  # finite: gradients defined
    if name == "xlogy":  # y = 0 is where dy is singular: torch divides each row's x by y (0/0 = NaN),
        # minicompiler sums the broadcast rows first (log(y) is taken before y is broadcast), then
        # divides (+-inf); both are limits of the same derivative, so compare away from it
        args[1] = torch.where(args[1] == 0, 0.5, args[1]).detach().requires_grad_()
    compiled = minicompiler.compile(lambda *a: fn(*a), backend="cpp")
    expected = torch.autograd.grad(fn(*args).sum(), args, allow_unused=True)
    actual = torch.autograd.grad(compiled(*args).sum(), args, allow_unused=True)
    for a, e in zip(actual, expected, strict=True):
        if e is not None:
            torch.testing.assert_close(a, e, equal_nan=True)


def test_pow_of_a_zero_dim_tensor_by_a_constant() -> None:
    """Triton's pow helper took a constant exponent as a Python number and failed on 0-d inputs."""
    for backend in BACKENDS:
        x = torch.rand(()) + 0.5
        compiled = minicompiler.compile(lambda x: torch.pow(x, 6.0) + torch.pow(2.0, x), backend=backend)
        torch.testing.assert_close(compiled(x), torch.pow(x, 6.0) + torch.pow(2.0, x))
