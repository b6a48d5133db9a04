"""CompileReport: the one record of a compilation that every view renders.

Each stage adds its artifact (a graph printed as Python, generated code), its time, and its
decisions (rewrites applied, fusions refused and why, guards, graph breaks). The report is plain
data: it serializes to JSON (MIME type `application/vnd.minicompiler.report+json`) so a saved
notebook can be re-rendered without a kernel, and it has text and HTML forms of its own.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

MIME_TYPE = "application/vnd.minicompiler.report+json"


@dataclass
class StageRecord:
    """One pipeline stage's result: e.g. name="decompose", text=the graph as Python."""

    name: str
    seconds: float
    text: str = ""
    language: str = "python"  # how to highlight `text`: python | cpp | text
    notes: list[str] = field(default_factory=list)  # decisions made, one line each
    node_lines: dict[str, int] = field(default_factory=dict)  # graph node name -> user source line


@dataclass
class TraceStep:
    """The symbolic interpreter's state after one instruction (the bytecode stepper replays these)."""

    offset: int
    opname: str
    argrepr: str
    lineno: int | None
    function: str
    stack: list[str]  # symbolic stack, bottom first, e.g. ["TensorVariable(x: float32[8])"]
    locals: dict[str, str]  # name -> symbolic value
    guards: list[str]  # guards added so far
    graph_nodes: list[str]  # graph so far, one printed line per node
    status: str = "captured"  # captured | constant | break


@dataclass
class InstructionInfo:
    offset: int
    opname: str
    argrepr: str
    lineno: int | None
    status: str  # captured | constant | break | not reached
    function: str = ""


@dataclass
class GraphBreakInfo:
    reason: str
    filename: str
    lineno: int | None
    line: str = ""
    instruction: str = ""
    hint: str = ""
    kind: str = ""  # e.g. "side effect", "data-dependent value", "data-dependent control flow"


@dataclass
class FusionInfo:
    producer: str
    consumer: str
    fused: bool
    reason: str


@dataclass
class KernelInfo:
    name: str
    kind: str  # pointwise | reduction | extern | alias | check (indices in range, before a gather)
    nodes: list[str]
    source_lines: list[str]  # "file:line  text" of the user code the kernel computes
    code: str = ""
    language: str = "text"
    # Memory traffic where known: what the generated loops load and store, and the least any
    # kernel computing these nodes must move (each input read once, each output written once).
    bytes_moved: int | None = None
    bytes_minimum: int | None = None


@dataclass
class GraphReport:
    """One captured graph and everything compiled from it."""

    backend: str
    guards: list[str] = field(default_factory=list)
    stages: list[StageRecord] = field(default_factory=list)
    kernels: list[KernelInfo] = field(default_factory=list)
    fusion: list[FusionInfo] = field(default_factory=list)
    fallback: str | None = None  # why this graph runs with torch ops instead of generated code
    # Training: the joint, forward and backward graphs (named stages), and the tensors the forward
    # saves for the backward ("name: float32[8]"); empty when nothing needs a gradient.
    autograd: list[StageRecord] = field(default_factory=list)
    saved_tensors: list[str] = field(default_factory=list)
    saved_bytes: dict[str, int] = field(default_factory=dict)  # where measured: {"eager": n, "compiled": n}
    # The same graph compiled again for a different context (a torch.autocast region): its report,
    # whose `variant` says for what
    variants: list[GraphReport] = field(default_factory=list)
    variant: str = ""

    def stage(self, name: str) -> StageRecord:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"no stage {name!r}; stages: {[s.name for s in self.stages]}")


@dataclass
class CompileReport:
    function: str
    filename: str = ""
    firstlineno: int = 0
    source: str = ""
    frontend: str = "minicompiler"  # which capture made the graph: minicompiler | dynamo
    bytecode: list[InstructionInfo] = field(default_factory=list)
    trace: list[TraceStep] = field(default_factory=list)
    trace_truncated: bool = False  # the capture ran more instructions than the trace keeps
    graphs: list[GraphReport] = field(default_factory=list)
    graph_breaks: list[GraphBreakInfo] = field(default_factory=list)
    # why the whole call runs eagerly; or the rest of it, after a break in code that cannot be captured
    eager_fallback: str | None = None
    recompile_reason: str | None = None  # why this compilation happened when an earlier one existed
    dynamic: list[str] = field(default_factory=list)  # dynamic dims, e.g. "dims 1 of x" (sizes not guarded)
    compile_seconds: float = 0.0
    run_times: dict[str, float] = field(default_factory=dict)  # e.g. {"eager": s, "compiled": s}
    run_samples: dict[str, list[float]] = field(default_factory=dict)  # seconds per call, repeated

    # -- serialization -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> CompileReport:
        def graph_report(g: dict[str, Any]) -> GraphReport:
            return GraphReport(
                backend=g["backend"],
                guards=list(g["guards"]),
                stages=[StageRecord(**s) for s in g["stages"]],
                kernels=[KernelInfo(**k) for k in g["kernels"]],
                fusion=[FusionInfo(**f) for f in g["fusion"]],
                fallback=g["fallback"],
                autograd=[StageRecord(**s) for s in g.get("autograd", [])],
                saved_tensors=list(g.get("saved_tensors", [])),
                saved_bytes=dict(g.get("saved_bytes", {})),
                variants=[graph_report(v) for v in g.get("variants", [])],
                variant=g.get("variant", ""),
            )

        fields = dict(data)
        fields["bytecode"] = [InstructionInfo(**i) for i in data["bytecode"]]
        fields["trace"] = [TraceStep(**t) for t in data["trace"]]
        fields["graphs"] = [graph_report(g) for g in data["graphs"]]
        fields["graph_breaks"] = [GraphBreakInfo(**b) for b in data["graph_breaks"]]
        return CompileReport(**fields)

    @staticmethod
    def from_json(text: str) -> CompileReport:
        return CompileReport.from_dict(json.loads(text))

    # -- views ---------------------------------------------------------------------------
    def to_text(self) -> str:
        out = [f"CompileReport for {self.function} ({self.filename}:{self.firstlineno})"]
        if self.recompile_reason:
            out.append(f"recompiled because: {self.recompile_reason}")
        if self.eager_fallback:
            out.append(f"runs eagerly: {self.eager_fallback}")
        for brk in self.graph_breaks:
            out.append(f"graph break at {brk.filename}:{brk.lineno} `{brk.line}`: {brk.reason}")
        for i, graph in enumerate(self.graphs):
            out += _graph_text(f"graph {i}", graph)
        out.append(f"\ncompile time: {self.compile_seconds * 1000:.1f} ms")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        kernels = sum(len(g.kernels) for g in self.graphs)
        state = f"eager fallback: {self.eager_fallback}" if self.eager_fallback else (
            f"{len(self.graphs)} graph(s), {len(self.graph_breaks)} break(s), {kernels} kernel(s)"
        )
        return f"<CompileReport {self.function}: {state}, {self.compile_seconds * 1000:.0f} ms>"

    def _repr_html_(self) -> str:
        from minicompiler.notebook.views import report_to_html

        return report_to_html(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {MIME_TYPE: self.to_dict(), "text/html": self._repr_html_(), "text/plain": repr(self)}


def _graph_text(title: str, graph: GraphReport) -> list[str]:
    out = [f"\n=== {title} (backend: {graph.backend}) ==="]
    if graph.fallback:
        out.append(f"runs with torch ops: {graph.fallback}")
    out.append("guards:")
    out.extend(f"  {g}" for g in graph.guards)
    for stage in graph.stages:
        out.append(f"\n--- {stage.name} ({stage.seconds * 1000:.1f} ms) ---")
        if stage.text:
            out.append(stage.text)
        out.extend(f"  * {note}" for note in stage.notes)
    for variant in graph.variants:
        out += _graph_text(f"{title}, compiled for {variant.variant}", variant)
    return out
