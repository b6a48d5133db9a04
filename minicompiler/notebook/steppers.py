"""Step through a compilation: the bytecode stepper replays the symbolic interpreter instruction
by instruction; the fusion stepper replays the scheduler's decisions one at a time.

Each stepper is plain Python state (`index`, `next()`, `previous()`, `html`) with an ipywidgets
face built on first display (buttons and a slider that move `index`), so tests drive it directly.
"""

from __future__ import annotations

from typing import Any

from minicompiler.notebook.dag import parse_graph
from minicompiler.notebook.kernel_views import fusion_dag_html, scheduled_stage
from minicompiler.notebook.markup import (
    ADDED_BACKGROUND,
    PRE,
    STATUS_COLORS,
    badge,
    esc,
    kernel_color,
    table,
    varies_with_python,
)
from minicompiler.notebook.source_views import bytecode_html, source_html
from minicompiler.report import CompileReport, GraphReport, TraceStep


class Stepper:
    """An index over `count` states, each rendered as HTML by `render(index)`."""

    title = ""
    empty = "nothing to step through"  # shown when there are no states

    def __init__(self, count: int):
        self.count = count
        self.index = 0
        self._view: Any = None  # (slider, html pane) once displayed

    def render(self, index: int) -> str:
        raise NotImplementedError

    @property
    def html(self) -> str:
        return self.render(self.index) if self.count else f"<p><i>{esc(self.empty)}</i></p>"

    def go(self, index: int) -> int:
        self.index = max(0, min(index, self.count - 1))
        if self._view is not None:
            slider, pane = self._view
            slider.value, pane.value = self.index, self.html
        return self.index

    def next(self) -> int:
        return self.go(self.index + 1)

    def previous(self) -> int:
        return self.go(self.index - 1)

    @property
    def widget(self) -> Any:
        """Previous / next buttons and a slider over the states, above the current state's HTML."""
        import ipywidgets as widgets

        slider = widgets.IntSlider(value=self.index, min=0, max=max(self.count - 1, 0),
                                   description=self.title)
        pane = widgets.HTML(self.html)
        back, forward = widgets.Button(description="◀ previous"), widgets.Button(description="next ▶")
        back.on_click(lambda _: self.previous())
        forward.on_click(lambda _: self.next())
        slider.observe(lambda change: self.go(change["new"]), names="value")
        self._view = (slider, pane)
        return widgets.VBox([widgets.HBox([back, forward, slider]), pane])

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The live widget, plus the current state as static HTML: a saved notebook (GitHub,
        nbconvert, no kernel) shows that instead of the widget's placeholder text."""
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["text/html"] = self.html
        position = f"{self.title} {self.index + 1} of {self.count}" if self.count else "empty"
        bundle["text/plain"] = f"<{type(self).__name__}: {position}>"
        return bundle


def _added(lines: list[str], before: list[str]) -> str:
    """Lines in a code box, those not in `before` marked as new."""
    old, new = set(before), f"<span style='display: block; background: {ADDED_BACKGROUND}'>"
    rows = [f"{esc(line)}\n" if line in old else f"{new}{esc(line)}</span>" for line in lines]
    return f"<pre style='{PRE}'>{''.join(rows) or '<i>empty</i>'}</pre>"


class BytecodeStepper(Stepper):
    """Replays report.trace: after each instruction, the symbolic stack and locals, the guards
    added so far and the graph so far (what this instruction added is marked)."""

    title = "instruction"
    empty = "this report has no trace of the symbolic interpreter (report.trace) to replay"

    def __init__(self, report: CompileReport):
        super().__init__(len(report.trace))
        self.report = report

    @property
    def step(self) -> TraceStep:
        return self.report.trace[self.index]

    def render(self, index: int) -> str:
        step, before = self.report.trace[index], self.report.trace[index - 1] if index else None
        position = next((i for i, inst in enumerate(self.report.bytecode)
                         if inst.offset == step.offset and inst.function == step.function), None)
        stack = "".join(f"<div style='border: 1px solid #aaa; margin: 1px; padding: 1px 4px'>{esc(v)}</div>"
                        for v in reversed(step.stack)) or "<i>empty</i>"
        local_rows = [[f"<code>{esc(k)}</code>", esc(v)] for k, v in step.locals.items()]
        header = (f"<p>step {index + 1}/{self.count}: <code>{esc(step.opname)} {esc(step.argrepr)}</code> "
                  f"(line {step.lineno}, offset {step.offset}, <code>{esc(step.function)}</code>) "
                  f"{badge(step.status, STATUS_COLORS.get(step.status, '#fff'))}</p>")
        columns = [
            ("stack (top first)", stack),
            ("locals", table(["name", "value"], local_rows) if local_rows else "<i>none</i>"),
            ("guards so far", _added(step.guards, before.guards if before else [])),
            ("graph so far", _added(step.graph_nodes, before.graph_nodes if before else [])),
        ]
        grid = "".join(f"<div style='flex: 1; min-width: 220px; margin-right: 8px'><b>{title}</b>{body}</div>"
                       for title, body in columns)
        # Every part but the source is drawn from one instruction, so all of it varies with Python.
        return varies_with_python(header) + source_html(self.report, "stepper", selected={step.lineno}) + (
            varies_with_python(f"<div style='display: flex; flex-wrap: wrap'>{grid}</div>"
                               f"<details><summary>bytecode</summary>"
                               f"{bytecode_html(self.report, selected=position)}</details>"))


class FusionStepper(Stepper):
    """Replays GraphReport.fusion: state 0 has every node in a kernel of its own; state i has the
    first i decisions applied (a fused pair's kernels merge; a refused pair stays apart)."""

    title = "decision"

    def __init__(self, report: CompileReport, graph_index: int = 0):
        self.graph: GraphReport = report.graphs[graph_index]
        stage = scheduled_stage(self.graph)
        dag = parse_graph(stage.text) if stage else None
        nodes = dag.nodes.values() if dag else []
        self.nodes = [n.name for n in nodes if n.op not in ("placeholder", "output")]
        super().__init__(len(self.graph.fusion) + 1)

    def groups(self, index: int | None = None) -> list[list[str]]:
        """The kernels (lists of node names, in graph order) after the first `index` decisions."""
        index = self.index if index is None else index
        parent = {n: n for n in self.nodes}

        def root(name: str) -> str:
            while parent[name] != name:
                name = parent[name]
            return name

        for decision in self.graph.fusion[:index]:
            if decision.fused and decision.producer in parent and decision.consumer in parent:
                parent[root(decision.consumer)] = root(decision.producer)
        grouped: dict[str, list[str]] = {}
        for name in self.nodes:
            grouped.setdefault(root(name), []).append(name)
        return list(grouped.values())

    def render(self, index: int) -> str:
        groups = self.groups(index)
        if index == 0:
            header = "<p>before fusion: every node is its own kernel</p>"
            pair: set[str] = set()
        else:
            d = self.graph.fusion[index - 1]
            verdict = badge("fused", ADDED_BACKGROUND) if d.fused else badge("not fused", "#ffd6d6")
            header = (f"<p>decision {index}/{self.count - 1}: <code>{esc(d.producer)}</code> &rarr; "
                      f"<code>{esc(d.consumer)}</code> {verdict}: {esc(d.reason)}</p>")
            pair = {d.producer, d.consumer}
        membership = {name: i for i, group in enumerate(groups) for name in group}
        rows = [[badge(f"kernel {i}", kernel_color(i)), esc(", ".join(g))] for i, g in enumerate(groups)]
        return (header + f"<p>{len(groups)} kernel(s)</p>" + fusion_dag_html(self.graph, membership, pair)
                + table(["kernel", "nodes"], rows))
