"""Programs the fuzzer (test_fuzz.py) found wrong once, kept as they were found, fixed since.

Each is written down whole (source and input recipe, as a failing fuzz run prints it), not only
as a seed: a change to the generator must not change what these tests run."""

from __future__ import annotations

import os

import pytest
import torch
from differential import check
from fuzz_programs import InputSpec, Program, generate

# what was wrong: the program
FOUND = {
    # -tril(x): GCC under -ffast-math wrote -(c ? x : 0.0) as c ? -x : 0.0, a +0.0 where eager's
    # negation gives -0.0, which signbit tells apart (C++ now negates by flipping the sign bit)
    "negated zero of a triangle": Program(
        424,
        "def program(x0):\n"
        "    v1 = torch.tril(x0, -1)\n"
        "    v2 = torch.amax(x0, 0, keepdim=True)\n"
        "    v3 = -v1\n"
        "    v4 = torch.signbit(v3).float()\n"
        "    v5 = v3.repeat(1, 1, 2)\n"
        "    v6 = torch.cos(v4)\n"
        "    return v6\n",
        [InputSpec(shape=(7, 5, 5), dtype=torch.bfloat16, layout="contiguous")]),
    # amax over a recomputed cos: the backward's cos (another kernel, -ffast-math) rounded
    # differently from the forward's, `x == amax` matched nothing and the gradient was lost
    "amax gradient lost after recomputation": Program(
        1037,
        "def program(x0):\n"
        "    v1 = torch.cos(x0)\n"
        "    v2 = torch.cos(x0)\n"
        "    v3 = torch.sum(v2, 0, keepdim=False)\n"
        "    v4 = v2 + v3\n"
        "    v5 = torch.amax(v2, 0, keepdim=False)\n"
        "    v6 = torch.amax(v1, 0, keepdim=False)\n"
        "    return v6\n",
        [InputSpec(shape=(5, 2, 5), dtype=torch.float32, layout="contiguous")]),
    # copysign's gradient to its sign is 0: the compiled output needed no gradient, eager's did
    # (all zeros), and the comparison summed no outputs (differential.py now checks the zeros)
    "no gradient where eager's is all zeros": Program(
        301919,
        "def program(x0):\n    v1 = torch.sin(x0)\n    v2 = v1 * x0\n    v3 = torch.atan2(v1, v2)\n"
        "    v4 = x0 + x0\n    v5 = torch.signbit(v4).float()\n    v6 = torch.copysign(v5, v3)\n    return v6\n",
        [InputSpec(shape=(2, 1), dtype=torch.float32, layout="offset")]),
}
# found on the Triton backend (TRITON_INTERPRET=1), replayed there and on C++
FOUND_TRITON = {
    # Triton's round gave +0.0 for -0.4 (floor(-0.4) + 1), nearbyint -0.0: copysign saw the difference
    "round of a small negative is -0.0": Program(
        306493,
        "def program(x0):\n    v1 = (x0 * 0.5)\n    v2 = torch.round(v1 * 4)\n    v3 = torch.tanh(v2)\n"
        "    v4 = x0 + x0\n    v5 = torch.mean(x0, 0, keepdim=False)\n    v6 = torch.copysign(x0, v3)\n"
        "    return v6, v1\n",
        [InputSpec(shape=(7, 5, 5), dtype=torch.float32, layout="contiguous")]),
}


@pytest.mark.parametrize("what", sorted(FOUND))
def test_fuzz_regression(what: str) -> None:
    check(FOUND[what])


@pytest.mark.parametrize("backend", ["cpp", "triton"])
@pytest.mark.parametrize("what", sorted(FOUND_TRITON))
def test_fuzz_regression_found_on_triton(what: str, backend: str) -> None:
    if backend == "triton" and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("Triton on CPU needs TRITON_INTERPRET=1")
    check(FOUND_TRITON[what], backend)


def test_a_program_replays_from_what_it_prints() -> None:
    """The printed form of a generated program (what a failure shows) rebuilds the same program."""
    for seed in range(20):
        program = generate(seed)
        replayed = eval(str(program), {"Program": Program, "InputSpec": InputSpec, "torch": torch})
        assert replayed.source == program.source
        for a, b in zip(replayed.inputs, program.inputs, strict=True):
            assert a.stride() == b.stride() and a.dtype == b.dtype
            torch.testing.assert_close(a, b, rtol=0, atol=0)
