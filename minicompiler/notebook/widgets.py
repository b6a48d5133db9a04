"""Interactive views (ipywidgets): one tab per stage, links across stages, and one kernel's Triton
and C++ side by side. The steppers are in steppers.py, the guard what-if in whatif.py.

Like the steppers, each is plain state with `index`, `next()`, `previous()` and `html`, and an
ipywidgets face built when displayed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minicompiler.notebook.graph_views import stage_html
from minicompiler.notebook.kernel_views import fusion_dag_html
from minicompiler.notebook.markup import SELECTED_BACKGROUND, badge, esc, highlight, kernel_color
from minicompiler.notebook.provenance import generated_lines_at, kernel_lines, nodes_at, stage_lines_at
from minicompiler.notebook.source_views import bytecode_html, source_html
from minicompiler.notebook.steppers import Stepper
from minicompiler.notebook.views import VIEWS
from minicompiler.report import CompileReport


class StageTabs(Stepper):
    """One tab per view with content (source, bytecode, ...) and one per stage of each graph."""

    title = "tab"

    def __init__(self, report: CompileReport):
        self.report = report
        self.tabs: list[tuple[str, str]] = []
        for name, view in VIEWS.items():
            if name != "passes" and (body := view(report, f"tab-{name}")):
                self.tabs.append((name, body))
        for graph in report.graphs:
            for previous, stage in zip([None, *graph.stages], graph.stages, strict=False):
                self.tabs.append((stage.name, stage_html(previous, stage)))
        super().__init__(len(self.tabs))

    @property
    def titles(self) -> list[str]:
        return [name for name, _ in self.tabs]

    def render(self, index: int) -> str:
        return self.tabs[index][1]

    def go(self, index: int) -> int:
        self.index = max(0, min(index, self.count - 1))
        if self._view is not None:
            self._view.selected_index = self.index
        return self.index

    @property
    def widget(self) -> Any:
        import ipywidgets as widgets

        tab = widgets.Tab(children=[widgets.HTML(body) for _, body in self.tabs], titles=self.titles)
        tab.selected_index = self.index
        tab.observe(lambda change: self.go(change["new"]) if change["new"] is not None else None,
                    names="selected_index")
        self._view = tab
        return tab


@dataclass
class Linked:
    """What the selected source lines became, stage by stage."""

    instructions: list[int]  # positions in report.bytecode
    nodes: dict[str, list[str]] = field(default_factory=dict)  # stage name -> its nodes from those lines
    stage_lines: dict[str, set[int]] = field(default_factory=dict)  # stage name -> lines of its text
    generated_lines: dict[str, set[int]] = field(default_factory=dict)  # kernel name -> lines of its code

    @property
    def kernels(self) -> list[str]:
        return list(self.generated_lines)


class CrossLinks(Stepper):
    """Select a source line (step through them, or `select_line`) and see what it became: its
    bytecode, its nodes in every stage, the kernels computing them and their generated lines.
    `select_kernel` goes back: a kernel's source lines."""

    title = "line"

    def __init__(self, report: CompileReport):
        self.report = report
        first = report.firstlineno or 1
        self.lines = list(range(first, first + len(report.source.rstrip("\n").splitlines())))
        self.selected: set[int] = set()
        super().__init__(len(self.lines))
        if self.count:
            self.go(0)

    def go(self, index: int) -> int:
        self.selected = {self.lines[max(0, min(index, self.count - 1))]} if self.count else set()
        return super().go(index)

    def select_line(self, lineno: int) -> None:
        if lineno not in self.lines:
            raise ValueError(f"line {lineno} is not in {self.report.function} "
                             f"(lines {self.lines[0]}-{self.lines[-1]})")
        self.go(self.lines.index(lineno))

    @property
    def widget(self) -> Any:
        """The line slider, and a menu of kernels to go back from a kernel to its lines."""
        import ipywidgets as widgets

        box = super().widget
        kernels = [k.name for g in self.report.graphs for k in g.kernels]
        menu = widgets.Dropdown(options=["(pick a kernel)", *kernels], description="kernel")
        menu.observe(lambda change: self.select_kernel(change["new"]) if change["new"] in kernels else None,
                     names="value")
        return widgets.VBox([menu, box])

    def select_kernel(self, name: str) -> None:
        """Back from a kernel: select every source line it computes."""
        for graph in self.report.graphs:
            if name in kernel_lines(graph):
                self.selected = set(kernel_lines(graph)[name])
                if self._view is not None:
                    self._view[1].value = self.html
                return
        raise ValueError(f"no kernel {name!r}")

    def linked(self) -> Linked:
        """Everything the selected lines became, found through the provenance of each stage."""
        selected = self.selected
        linked = Linked([i for i, inst in enumerate(self.report.bytecode) if inst.lineno in selected])
        for graph in self.report.graphs:
            for stage in graph.stages:
                nodes = [node for n in sorted(selected) for node in nodes_at(stage, n)]
                lines = set().union(*(stage_lines_at(stage, n) for n in selected))
                if nodes or lines:
                    linked.nodes[stage.name], linked.stage_lines[stage.name] = nodes, lines
            for kernel in graph.kernels:
                if selected & set(kernel_lines(graph)[kernel.name]):
                    linked.generated_lines[kernel.name] = set().union(
                        *(generated_lines_at(kernel.code, n) for n in selected))
        return linked

    def render(self, index: int) -> str:
        linked, mark = self.linked(), f"background: {SELECTED_BACKGROUND}"
        parts = [f"<p>selected line(s): {', '.join(map(str, sorted(self.selected)))}</p>",
                 source_html(self.report, "links", selected=self.selected),
                 "<b>bytecode</b>" + bytecode_html(self.report, selected_lines=self.selected)]
        for graph in self.report.graphs:
            for stage in graph.stages:
                if stage.name in linked.stage_lines:
                    parts.append(f"<b>{esc(stage.name)}</b>: {esc(', '.join(linked.nodes[stage.name]))}"
                                 + highlight(stage.text, stage.language,
                                             dict.fromkeys(linked.stage_lines[stage.name], mark)))
            highlighted = {node for nodes in linked.nodes.values() for node in nodes}
            parts.append(fusion_dag_html(graph, highlighted=highlighted))
            for index_k, kernel in enumerate(graph.kernels):
                if kernel.name in linked.generated_lines:
                    parts.append(badge(kernel.name, kernel_color(index_k))
                                 + highlight(kernel.code, kernel.language,
                                             dict.fromkeys(linked.generated_lines[kernel.name], mark)))
        return "".join(parts)


class KernelSideBySide(Stepper):
    """Each kernel of a schedule as C++ and as Triton, side by side (Triton source needs no GPU:
    it is only generated here, not compiled)."""

    title = "kernel"

    def __init__(self, compiled_or_schedule: Any):
        from minicompiler.fuse import Schedule

        schedule = compiled_or_schedule
        if not isinstance(schedule, Schedule):  # a CompiledFunction: its latest compiled graph
            cache = getattr(compiled_or_schedule, "cache", None)
            if not cache or "fuse" not in cache[-1].compiled.artifacts:
                raise ValueError("need a Schedule, or a CompiledFunction that has been called (not eager)")
            schedule = cache[-1].compiled.artifacts["fuse"]
        self.kernels = list(schedule.kernels)
        super().__init__(len(self.kernels))

    def sources(self, index: int) -> dict[str, str]:
        """{"cpp": text, "triton": text} for one kernel (an error message where a backend refuses it)."""
        from minicompiler.codegen import CodegenError, cpp, triton

        out = {}
        for name, backend in (("cpp", cpp), ("triton", triton)):
            try:
                out[name] = "\n".join(backend.kernel_source(self.kernels[index]).lines)
            except CodegenError as error:
                out[name] = f"// {name} cannot generate this kernel: {error}"
        return out

    def render(self, index: int) -> str:
        sources = self.sources(index)
        columns = "".join(
            f"<div style='flex: 1; min-width: 0; margin-right: 6px'><b>{title}</b>"
            f"{highlight(sources[key], 'python' if key == 'triton' else 'cpp')}</div>"
            for key, title in (("cpp", "C++"), ("triton", "Triton"))
        )
        return (f"<p>{badge(self.kernels[index].name, kernel_color(index))} ({self.kernels[index].kind})</p>"
                f"<div style='display: flex'>{columns}</div>")
