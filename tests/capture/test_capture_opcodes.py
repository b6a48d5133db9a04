"""Python constructs whose bytecode differs between 3.11, 3.12 and 3.13.

Each function compiles to a different opcode mix on each version (PRECALL/KW_NAMES on 3.11,
inlined comprehensions and BINARY_SLICE on 3.12, CALL_KW/TO_BOOL/LOAD_FAST_LOAD_FAST on
3.13, ...); the suite is run on every supported version.
"""

from __future__ import annotations

import sys

import torch


def comprehensions(x, xs):
    squares = [t * t for t in xs]  # 3.12+: inlined (LOAD_FAST_AND_CLEAR); 3.11: a nested function
    named = {f"t{i}": t for i, t in enumerate(xs)}  # MAP_ADD
    h = 1.0  # the comprehension variable below shadows this local
    shifted = [x + h for h in range(2)]
    return torch.stack(squares), named, shifted, h


def calls(x, shape):
    def scale(t, factor=2.0, *, bias=0.0):  # defaults and kw-only defaults on a nested function
        return t * factor + bias

    opts = {"bias": 1.0}
    y = x.reshape(*shape)  # CALL_FUNCTION_EX
    z = scale(x, **opts)  # DICT_MERGE
    w = scale(x, factor=3.0)  # KW_NAMES (3.11, 3.12) / CALL_KW (3.13)
    return y, z, w, +x  # unary plus: CALL_INTRINSIC_1 on 3.12+


def unpacking(x, pair):
    first, *rest = pair  # UNPACK_EX
    a, b = x, x * 2  # STORE_FAST_STORE_FAST on 3.13
    joined = (*pair, x)  # LIST_TO_TUPLE / CALL_INTRINSIC_1
    return first + sum(rest) + a + b, len(joined), x[1:], x[:-1:2]  # BINARY_SLICE on 3.12+


def conditions(x, flag, maybe):
    n = x.shape[0]
    small = 0 < n < 10  # chained comparison: COPY / SWAP
    pick = flag and n or -1  # JUMP_IF_*_OR_POP on 3.11; COPY + POP_JUMP on 3.12+
    if maybe is None:  # POP_JUMP_IF_NONE
        x = x + 1
    if not flag:  # UNARY_NOT / TO_BOOL
        x = x - 1
    text = f"{n!r:>3}-{small}"  # FORMAT_VALUE on 3.11/3.12; CONVERT_VALUE, FORMAT_WITH_SPEC on 3.13
    while n > 1:
        n //= 2
        x = x * 2
    del small
    return x, pick, text


def closures(x):
    k = 3

    def outer(t):
        def inner(u):
            return u * k + t  # LOAD_DEREF of two levels of cells

        return inner(t)

    return outer(x)


def test_comprehensions(check) -> None:
    check(comprehensions, lambda: (torch.randn(3), [torch.randn(3), torch.randn(3)]))


def test_calls(check) -> None:
    check(calls, lambda: (torch.randn(6), (2, 3)))


def test_unpacking(check) -> None:
    check(unpacking, lambda: (torch.randn(5), (torch.randn(5), torch.randn(5), torch.randn(5))))


def test_conditions(check) -> None:
    for flag in (True, False):
        check(conditions, lambda flag=flag: (torch.randn(4), flag, None))


def test_closures(check) -> None:
    check(closures, lambda: (torch.randn(3),))


def test_this_versions_opcodes_were_seen() -> None:
    from minicompiler.capture import capture

    result = capture(calls, (torch.randn(6), (2, 3)), {})
    seen = {r.opname for r in result.bytecode if r.status != "not reached"}
    expected = {(3, 11): {"PRECALL", "KW_NAMES"}, (3, 12): {"KW_NAMES", "CALL_INTRINSIC_1"},
                (3, 13): {"CALL_KW", "CALL_INTRINSIC_1"}}.get(sys.version_info[:2], set())
    assert expected <= seen
