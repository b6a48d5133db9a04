"""Programs the fuzzer (test_fuzz.py) found wrong once, kept as they were found, fixed since.

Each is written down whole (source and input recipe, as a failing fuzz run prints it), not only
as a seed: a change to the generator must not change what these tests run."""

from __future__ import annotations

import pytest
import torch
from differential import check
from fuzz_programs import InputSpec, Program, generate

# what was wrong: the program
FOUND = {
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
}


@pytest.mark.parametrize("what", sorted(FOUND))
def test_fuzz_regression(what: str) -> None:
    check(FOUND[what])


def test_a_program_replays_from_what_it_prints() -> None:
    """The printed form of a generated program (what a failure shows) rebuilds the same program."""
    for seed in range(20):
        program = generate(seed)
        replayed = eval(str(program), {"Program": Program, "InputSpec": InputSpec, "torch": torch})
        assert replayed.source == program.source
        for a, b in zip(replayed.inputs, program.inputs, strict=True):
            assert a.stride() == b.stride() and a.dtype == b.dtype
            torch.testing.assert_close(a, b, rtol=0, atol=0)
