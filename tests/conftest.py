"""Helpers shared by the tests."""

from __future__ import annotations

import pytest
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
