"""Programs the fuzzer (test_fuzz.py) found wrong once, kept as they were found, fixed since."""

from __future__ import annotations

import pytest
from differential import check
from fuzz_programs import generate

# seed: what was wrong
FOUND = {
    # amax over a recomputed cos: the backward's cos (another kernel, -ffast-math) rounded
    # differently from the forward's, `x == amax` matched nothing and the gradient was lost
    1037: "amax gradient lost after recomputation",
}


@pytest.mark.parametrize("seed", sorted(FOUND))
def test_fuzz_regression(seed: int) -> None:
    check(generate(seed))
