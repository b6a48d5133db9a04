"""PyTorch's own OpInfo samples through minicompiler, held against a committed table.

`expected.json` says, per op, how its first sample compiles today: generated (kernels
minicompiler wrote), extern (an opaque torch call in the graph), fallback (eager), or skip (eager
rejects the sample). A regression (generated -> extern) or a wrong result turns this red; a new
lowering turns it red too, until the table is regenerated:

    TRITON_INTERPRET=1 python -m minicompiler.bench.opinfo --samples 1 --jobs 2 \
        --json tests/opinfo/expected.json

CI time: every generated op and every 8th other op (sorted by name) on C++, one sample each;
a dozen generated pointwise ops through Triton under TRITON_INTERPRET=1.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("expecttest")  # torch.testing._internal imports it

from minicompiler.bench.opinfo import classify, op_db, op_key  # noqa: E402

EXPECTED: dict[str, str] = json.loads((Path(__file__).parent / "expected.json").read_text())
OPS = {op_key(op): op for op in op_db()}


def _ci_subset() -> list[str]:
    others = sorted(k for k, s in EXPECTED.items() if s not in ("generated", "skip"))
    chosen = [k for k, s in EXPECTED.items() if s == "generated"] + others[::8]
    return sorted(k for k in chosen if k in OPS)


TRITON_OPS = [k for k in ("abs", "add", "sin", "exp", "mul", "sub", "neg", "tanh", "sigmoid", "clamp",
                          "sqrt", "div.no_rounding_mode") if EXPECTED.get(k) == "generated"]


def _check(key: str, backend: str) -> None:
    status, why = classify(OPS[key], samples=1, backend=backend, timeout=120)
    assert status not in ("wrong", "error"), f"{key}: {status}: {why}"
    assert status == EXPECTED[key], (
        f"{key} is now {status} ({why}), the table says {EXPECTED[key]}; if this is a new lowering, "
        "regenerate tests/opinfo/expected.json (see this file's docstring)")


@pytest.mark.parametrize("key", _ci_subset())
def test_opinfo_cpp(key: str) -> None:
    _check(key, "cpp")


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="Triton on CPU needs TRITON_INTERPRET=1")
@pytest.mark.parametrize("key", TRITON_OPS)
def test_opinfo_triton(key: str) -> None:
    _check(key, "triton")
