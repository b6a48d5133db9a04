"""Progress bars for the slow parts: max-autotune trying candidates, a large model compiling.

tqdm draws the bar when it is installed (in a terminal or a notebook); otherwise one line on
stderr is rewritten in place. Small graphs compile in well under a second and get no bar.
$MINICOMPILER_PROGRESS=1 shows a bar for every graph, =0 for none.

    with progress.bar("max-autotune", total=40) as bar:   # a known number of steps
        bar.step("kernel_add_relu BLOCK=256")
    with progress.compiling(graph):                        # a graph's stages, if it is large
        ...  # each stage the pipeline times calls progress.stage(name)
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from collections.abc import Iterator
from typing import Any

LARGE_GRAPH = 400  # nodes: from about this size a graph takes seconds to compile on a CPU

_active: contextvars.ContextVar[Bar | None] = contextvars.ContextVar("minicompiler_progress", default=None)


class Bar:
    """A bar (tqdm's, or a plain stderr line) that moves one step per `step(label)`."""

    def __init__(self, description: str, total: int | None) -> None:
        self.description, self.total, self.done = description, total, 0
        try:
            from tqdm.auto import tqdm
        except ImportError:
            self._tqdm: Any = None
        else:
            self._tqdm = tqdm(total=total, desc=description, unit="step", leave=False, file=sys.stderr)

    def step(self, label: str) -> None:
        self.done += 1
        if self._tqdm is not None:
            self._tqdm.set_postfix_str(label, refresh=False)
            self._tqdm.update(1)
            return
        of = f"/{self.total}" if self.total else ""
        sys.stderr.write(f"\r{self.description}: {self.done}{of} {label[:60]:60}")
        sys.stderr.flush()

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        elif self.done:
            sys.stderr.write("\r" + " " * (len(self.description) + 80) + "\r")


def _wanted(default: bool) -> bool:
    setting = os.environ.get("MINICOMPILER_PROGRESS", "")
    return {"1": True, "0": False}.get(setting, default)


@contextlib.contextmanager
def bar(description: str, total: int | None = None, enabled: bool = True) -> Iterator[Bar | None]:
    """A bar for the block (None when not shown); it also receives the pipeline's stages."""
    if not _wanted(enabled):
        yield None
        return
    shown = Bar(description, total)
    token = _active.set(shown)
    try:
        yield shown
    finally:
        _active.reset(token)
        shown.close()


@contextlib.contextmanager
def compiling(graph: Any, what: str = "compiling") -> Iterator[None]:
    """A bar over the pipeline's stages while `graph` compiles, if it is large (and no bar is up)."""
    nodes = len(graph.nodes)
    if _active.get() is not None:
        yield
        return
    with bar(f"minicompiler: {what} a graph of {nodes} nodes", enabled=nodes >= LARGE_GRAPH):
        yield


def stage(name: str) -> None:
    """The pipeline finished stage `name` (the open bar, if any, moves)."""
    shown = _active.get()
    if shown is not None:
        shown.step(name)
