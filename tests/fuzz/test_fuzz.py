"""Differential fuzzing in CI: random programs (fuzz_programs.py), compiled vs eager, for a fixed
time budget. FUZZ_SECONDS changes the budget (default 60); FUZZ_SEED=n replays one program;
FUZZ_START=n starts from another seed (the default walks the same seeds every run, so CI is stable).
A failure prints its seed, source and a Program(...) entry: paste that into test_regressions.py once fixed."""

from __future__ import annotations

import os
import time

from differential import check
from fuzz_programs import generate


def test_fuzz_programs() -> None:
    if "FUZZ_SEED" in os.environ:
        check(generate(int(os.environ["FUZZ_SEED"])))
        return
    budget = float(os.environ.get("FUZZ_SECONDS", "60"))
    seed = int(os.environ.get("FUZZ_START", "0"))
    start = time.perf_counter()
    while time.perf_counter() - start < budget:
        check(generate(seed))
        seed += 1
    print(f"fuzzed {seed - int(os.environ.get('FUZZ_START', '0'))} programs")
