"""Helpers shared by the tests."""

from __future__ import annotations

import os

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode


class DispatchedOps(TorchDispatchMode):
    """The names of the aten ops run inside the block (`with DispatchedOps() as ops: ...; ops.names`)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.fixture
def dispatched_ops() -> type[DispatchedOps]:
    """The class above: `with dispatched_ops() as ops:` counts what a compiled call dispatches."""
    return DispatchedOps


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A case of the Triton backend on CPU tensors runs through Triton's interpreter, which the README's
    test command turns on (TRITON_INTERPRET=1). Run without it (a GPU machine, say), the backend
    refuses CPU tensors, as it should: the case is skipped, saying why, rather than failed.
    (`-p tests.triton_on_gpu` runs these cases on the GPU instead.)"""
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    device = str(params.get("device", torch.get_default_device().type))
    # a case parametrized with backend="triton", or a test marked as running Triton on the default device
    triton = params.get("backend") == "triton" or item.get_closest_marker("triton_on_cpu_tensors") is not None
    if triton and device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the Triton backend on CPU tensors runs in Triton's interpreter: set TRITON_INTERPRET=1")
