"""Symbolic sizes: polynomial arithmetic, decisions recorded as guards, specialization."""

from __future__ import annotations

import math

import pytest
import torch

from minicompiler.ir.symbolic import SizeEnv, bind_symbols, size_code
from minicompiler.ir.symbolic_shapes import reshape_view_strides


def symbols(*hints: int) -> tuple[SizeEnv, list]:
    env = SizeEnv()
    return env, [env.symbol(h) for h in hints]


def test_arithmetic_builds_canonical_polynomials() -> None:
    env, (s0, s1) = symbols(32, 16)
    assert size_code(16 * s0 + s0 * 4) == "20*s0"
    assert size_code(s0 * s1 * 2 - 1) == "2*s0*s1 - 1"
    assert s0 * s1 - s1 * s0 == 0 and type(s0 * s1 - s1 * s0) is int  # the symbols cancel: a plain int
    assert size_code((16 * s0 * s1) // (16 * s1)) == "s0"  # exact division keeps the symbol
    assert size_code((6 * s0) % 3) == "0"
    assert env.guards == []  # nothing above needed a decision


def test_comparisons_the_lower_bound_decides_record_nothing() -> None:
    env, (s0, s1) = symbols(32, 16)
    assert s0 != 1 and s0 >= 2 and s0 * s1 > 3 and not (s0 + 1 == 0) and -s0 < 0
    assert s0 * s1 == s1 * s0  # structurally equal
    assert s0 * s1 - s1 > 0 and s0 != s0 * s1  # decided in t = s - 2: t0*t1 + 2*t0 + t1 + 2 > 0
    assert env.guards == []


def test_other_comparisons_are_answered_from_hints_and_guarded() -> None:
    env, (s0, s1) = symbols(32, 16)
    assert (s0 > 40) is False
    assert s0 != s1
    assert [str(g) for g in env.guards] == ["s0 <= 40", "s0 != s1"]
    assert env.holds({"s0": 8, "s1": 3})
    failed = env.first_failing({"s0": 64, "s1": 3})
    assert failed is not None and str(failed) == "s0 <= 40"
    assert not env.holds({"s0": 7, "s1": 7})


def test_plain_ints_and_text_specialize() -> None:
    env, (s0,) = symbols(32)
    assert int(s0) == 32 and f"{s0}" == "32" and list(range(s0))[-1] == 31
    assert [str(g) for g in env.guards] == ["s0 == 32"]
    assert not env.holds({"s0": 33})


def test_division_that_is_not_exact_specializes() -> None:
    env, (s0,) = symbols(30)
    assert (s0 // 4) == 7  # 30 // 4, for s0 == 30 only
    assert [str(g) for g in env.guards] == ["s0 == 30"]


def test_hash_agrees_with_equality() -> None:
    env, (s0,) = symbols(32)
    assert {s0: "a"}[s0 * 1] == "a"
    assert hash(s0) == hash(32)


def test_bind_symbols_reads_a_call_and_checks_it_fits() -> None:
    env, (s0, s1) = symbols(32, 16)
    shapes = [(s0, 4), (4 * s1, s0)]
    assert bind_symbols(shapes, [(5, 4), (12, 5)]) == {"s0": 5, "s1": 3}
    with pytest.raises(ValueError, match="do not fit"):
        bind_symbols(shapes, [(5, 4), (12, 6)])  # s0 is 5 and 6


def test_reshape_view_strides_agrees_with_torch() -> None:
    """The port of torch's view rule, on plain ints, against torch itself."""
    base = torch.randn(4, 6, 10)
    tensors = [base, base.transpose(0, 1), base.permute(2, 0, 1), base[:, ::2], base[1:3], base[:, :, :5],
               base.transpose(1, 2)[:, 1:]]
    targets = [(-1,), (4, 60), (24, 10), (2, 2, 60), (4, 6, 10), (6, 4, 10), (4, 6, 5, 2), (1, 240)]
    for x in tensors:
        for target in targets:
            target = tuple(x.numel() if t == -1 else t for t in target)
            if math.prod(target) != x.numel():
                continue
            try:
                expected = tuple(x.view(target).stride())
            except RuntimeError:
                expected = None
            got = reshape_view_strides(tuple(x.shape), tuple(x.stride()), target)
            assert got == expected or (expected is not None and got is not None and all(
                n == 1 or a == b for n, a, b in zip(target, got, expected, strict=True))), (x.shape, x.stride(), target)


def test_reshape_view_strides_on_symbols() -> None:
    env, (s0, s1) = symbols(4, 6)
    transposed = ((s1, s0, 8), (8, 8 * s1, 1))  # (s0, s1, 8) with its first two dims swapped
    strides = reshape_view_strides(*transposed, (s1, s0, 2, 4))  # splitting a dim: a view
    assert strides is not None and [size_code(s) for s in strides] == ["8", "8*s1", "4", "1"]
    assert reshape_view_strides(*transposed, (s1, s0 * 8)) is None  # merging across the swap: a copy
    assert reshape_view_strides(*transposed, (s1 * s0, 8)) is None
