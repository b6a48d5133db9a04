"""Guard what-if: change one input's shape, dtype or requires_grad (or a module's `training` flag)
and see which guard fails, and what a recompile for the new input produces, as a graph diff.

    what_if = GuardWhatIf(compiled_fn, x, w)
    what_if.change(shape=(16, 8))          # the input at what_if.index
    what_if.failing_guard                  # 'x: float32[4, 8] contiguous cpu requires_grad=False'
    what_if.html                           # the guard, the new guards and the captured graph's diff

Nothing the caller owns changes: inputs are fresh random tensors, modules are copied, and the
recompile uses a new compiled function (the original's cache is untouched).
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass
from typing import Any

import torch

from minicompiler.notebook.diff import diff_html
from minicompiler.notebook.markup import ADDED_BACKGROUND, BREAK_BACKGROUND, esc
from minicompiler.notebook.steppers import Stepper
from minicompiler.notebook.views import summary_html
from minicompiler.report import CompileReport


@dataclass
class WhatIf:
    """The outcome of one change: the guard that fails (None: the cached code is reused) and the
    report of compiling for the changed inputs (None if no recompile was needed)."""

    change: str
    failing_guard: str | None
    report: CompileReport | None = None
    error: str | None = None  # the function itself failed on the changed inputs


def argument_names(fn: Any, count: int) -> list[str]:
    """The parameter names of `fn`'s first `count` positional arguments ("argument 2" if unknown)."""
    try:
        target = fn.forward if isinstance(fn, torch.nn.Module) else fn
        names = [p.name for p in inspect.signature(target).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"argument {i}" for i in range(count)]


def describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"{dtype}{list(value.shape)} requires_grad={value.requires_grad}"
    if isinstance(value, torch.nn.Module):
        return f"{type(value).__name__} training={value.training}"
    return repr(value)


def changed_value(value: Any, shape: tuple[int, ...] | None, dtype: torch.dtype | None,
                  requires_grad: bool | None, training: bool | None) -> Any:
    """A new value like `value` with the changes: random data for a tensor, a copy for a module."""
    if isinstance(value, torch.nn.Module):
        module = copy.deepcopy(value)
        return module.train(training) if training is not None else module
    shape = tuple(value.shape) if shape is None else tuple(shape)
    dtype = value.dtype if dtype is None else dtype
    if dtype.is_floating_point or dtype.is_complex:
        new = torch.randn(shape, dtype=dtype, device=value.device)
    else:
        new = torch.randint(0, 10, shape, device=value.device).to(dtype)
    return new.requires_grad_(value.requires_grad if requires_grad is None else requires_grad)


class GuardWhatIf(Stepper):
    """`index` picks the input to change (a tensor or module argument); `change(...)` tries it."""

    title = "input"

    def __init__(self, compiled: Any, *args: Any, **kwargs: Any):
        from minicompiler.capture import first_failing_guard

        self.compiled, self.args, self.kwargs = compiled, args, kwargs
        if not any(first_failing_guard(e.guards, args, kwargs) is None for e in compiled.cache):
            compiled(*args, **kwargs)  # compile for these inputs first
        passing = (e for e in compiled.cache if first_failing_guard(e.guards, args, kwargs) is None)
        self.entry = next(passing, None)
        if self.entry is None:
            raise ValueError("these inputs run eagerly (no compiled graph to guard): see the report")
        self.positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor | torch.nn.Module)]
        self.names = argument_names(compiled.fn, len(args))
        self.outcome: WhatIf | None = None
        super().__init__(len(self.positions))

    @property
    def failing_guard(self) -> str | None:
        return self.outcome.failing_guard if self.outcome else None

    def change(self, shape: tuple[int, ...] | None = None, dtype: torch.dtype | None = None,
               requires_grad: bool | None = None, training: bool | None = None) -> WhatIf:
        """Change the input at `index`; find the first failing guard; recompile if one fails."""
        from minicompiler.api import compile as compile_fn
        from minicompiler.capture import first_failing_guard

        position = self.positions[self.index]
        args = list(self.args)
        args[position] = changed_value(args[position], shape, dtype, requires_grad, training)
        what = f"{self.names[position]}: {describe(self.args[position])} -> {describe(args[position])}"
        failing = first_failing_guard(self.entry.guards, tuple(args), self.kwargs)
        self.outcome = WhatIf(what, failing.description if failing else None)
        if failing is not None:
            fresh = compile_fn(self.compiled.fn, backend=self.compiled.backend, mode=self.compiled.mode,
                               dynamic=self.compiled.dynamic, options=self.compiled.options)
            try:
                fresh(*args, **self.kwargs)
            except Exception as error:  # the user's function rejects the new input: say so
                self.outcome.error = f"{type(error).__name__}: {error}"
            self.outcome.report = fresh.report
        self.go(self.index)  # refresh the displayed HTML
        return self.outcome

    def render(self, index: int) -> str:
        position = self.positions[index]
        parts = [f"<p>input <code>{esc(self.names[position])}</code>: "
                 f"<code>{esc(describe(self.args[position]))}</code></p>"]
        outcome = self.outcome
        if outcome is None:
            return parts[0] + "<p><i>change the input to see which guard fails</i></p>"
        parts.append(f"<p>{esc(outcome.change)}</p>")
        if outcome.failing_guard is None:
            parts.append(f"<p style='background: {ADDED_BACKGROUND}'>every guard holds: the compiled code "
                         "is reused</p>")
            return "".join(parts)
        parts.append(f"<p style='background: {BREAK_BACKGROUND}'>guard fails: "
                     f"<code>{esc(outcome.failing_guard)}</code> &rarr; recompile</p>")
        if outcome.error:
            parts.append(f"<p>the function itself fails on the changed input: {esc(outcome.error)}</p>")
        if outcome.report is not None:
            parts.append(summary_html(outcome.report))
            parts.append(self._diffs(outcome.report))
        return "".join(parts)

    def _diffs(self, new: CompileReport) -> str:
        old = self.entry.report
        if not old.graphs or not new.graphs:
            return ""
        old_graph, new_graph = old.graphs[0], new.graphs[0]
        guards = diff_html("\n".join(old_graph.guards), "\n".join(new_graph.guards), "text")
        graphs = [f"<b>{esc(a.name)}</b>" + diff_html(a.text, b.text, a.language)
                  for a, b in zip(old_graph.stages, new_graph.stages, strict=False)
                  if a.name == b.name and a.language == "python"]
        return "<b>guards</b>" + guards + "".join(graphs)

    @property
    def widget(self) -> Any:
        """Pick an input, edit its shape / dtype / requires_grad (or a module's training flag), try it."""
        import ipywidgets as widgets

        box = super().widget
        shape = widgets.Text(description="shape", placeholder="e.g. 16, 8")
        dtype = widgets.Dropdown(description="dtype", options=["(same)", "float32", "float64", "float16",
                                                              "bfloat16", "int64", "int32", "bool"])
        grad = widgets.Dropdown(description="requires_grad", options=["(same)", "True", "False"])
        training = widgets.Dropdown(description="training", options=["(same)", "True", "False"])
        button = widgets.Button(description="try it")

        def flag(value: str) -> bool | None:
            return None if value == "(same)" else value == "True"

        def try_it(_: Any) -> None:
            text = shape.value.replace("(", "").replace(")", "")
            size = tuple(int(s) for s in text.split(",") if s.strip())
            self.change(size or None, None if dtype.value == "(same)" else getattr(torch, dtype.value),
                        flag(grad.value), flag(training.value))

        button.on_click(try_it)
        return widgets.VBox([widgets.HBox([shape, dtype, grad, training, button]), box])
