"""A pytest plugin that runs the suite's Triton tests on a real GPU (the lent H100), unchanged:

    python -m pytest -p tests.triton_on_gpu tests/decompose ...

In CI the Triton cases run on CPU tensors through Triton's interpreter, and the tests choose them
when TRITON_INTERPRET=1 at collection. This plugin sets it for collection, keeps only those cases,
turns the interpreter off once they are collected, and makes CUDA the default device: the same
tensors are then made on the GPU and the same generated kernels are compiled by Triton for it, so
code that only ever ran in the interpreter (no libdevice, lenient about types) meets the compiler.
"""

from __future__ import annotations

import importlib
import os

import pytest
import torch

# Triton decides when it is imported whether its own library functions are interpreted: import it
# compiled, before TRITON_INTERPRET=1 is set for the collection.
os.environ["TRITON_INTERPRET"] = "0"
for _module in ("triton", "triton.language", "triton.experimental.gluon.language"):
    try:
        importlib.import_module(_module)
    except ImportError:
        pass  # an older Triton without Gluon


def pytest_configure(config: pytest.Config) -> None:
    if not torch.cuda.is_available():
        raise pytest.UsageError("tests.triton_on_gpu needs a CUDA GPU")
    os.environ["TRITON_INTERPRET"] = "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    on_gpu = [item for item in items if ("triton" in item.nodeid or item.get_closest_marker("triton_on_cpu_tensors"))
              and not _asks_for_the_cpu(item)]
    config.hook.pytest_deselected(items=[item for item in items if item not in on_gpu])
    items[:] = on_gpu


def _asks_for_the_cpu(item: pytest.Item) -> bool:
    """A case that names the CPU as its device, or C++ as its backend (their twins run here)."""
    params = getattr(item, "callspec", None)
    return params is not None and bool({"cpu", "cpp"} & set(map(str, params.params.values())))


def pytest_collection_finish(session: pytest.Session) -> None:
    os.environ["TRITON_INTERPRET"] = "0"  # minicompiler and Triton read it when a kernel is built
    torch.set_default_device("cuda")
