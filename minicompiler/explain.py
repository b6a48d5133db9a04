"""`minicompiler.explain(fn)(*args)`: how capture sees a function, without compiling kernels.

    out = minicompiler.explain(f)(x)
    out.graph_count, out.graph_break_count     # 2, 1
    print(out)                                  # graphs, breaks with their lines, ops, guards

Like `torch._dynamo.explain`, it runs the function once (so its side effects happen once and its
result is the eager one), here through `minicompiler.compile(fn, backend="eager")`: capture,
graph breaks and guards exactly as in a real compilation, each captured graph run with torch ops.
Everything it shows is read from the CompileReport(s) of that call, plus the op names of each
captured graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from minicompiler.api import CompiledFunction, compile
from minicompiler.ir import Graph
from minicompiler.report import CompileReport, GraphBreakInfo


@dataclass(repr=False)
class ExplainOutput:
    """What capture made of one call: its graphs, the breaks between them, ops and guards."""

    graph_count: int
    graph_break_count: int
    breaks: list[GraphBreakInfo]
    ops_per_graph: list[list[str]]  # op names of each captured graph, in execution order
    guards_per_graph: list[list[str]]
    compile_seconds: float
    reports: list[CompileReport]

    @property
    def op_count(self) -> int:
        return sum(len(ops) for ops in self.ops_per_graph)

    @property
    def eager_fallbacks(self) -> list[str]:
        """Why the whole call ran eagerly, when capture could not even start a graph."""
        return [r.eager_fallback for r in self.reports if r.eager_fallback]

    def to_text(self) -> str:
        out = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
               f"Op Count: {self.op_count}"]
        out += [f"Runs eagerly: {reason}" for reason in self.eager_fallbacks]
        out.append("Break Reasons:")
        for number, brk in enumerate(self.breaks, 1):
            out += [f"  Break Reason {number}:", f"    Reason: {brk.reason}" + (f" ({brk.kind})" if brk.kind else ""),
                    f"    User code: {brk.filename}:{brk.lineno}  {brk.line}"]
            out += [f"    Hint: {brk.hint}"] if brk.hint else []
        out.append("Ops per Graph:")
        for number, ops in enumerate(self.ops_per_graph, 1):
            out += [f"  Ops {number}:"] + [f"    {op}" for op in ops]
        out.append("Guards per Graph:")
        for number, guards in enumerate(self.guards_per_graph, 1):
            out += [f"  Graph {number}:"] + [f"    {guard}" for guard in guards]
        out.append(f"Compile Time: {self.compile_seconds * 1000:.1f} ms")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.to_text()

    __repr__ = __str__


def explain(fn: Callable) -> Callable[..., ExplainOutput]:
    """`explain(fn)(*args, **kwargs)` runs `fn` once under capture and says what capture made of it."""

    def run_and_explain(*args: object, **kwargs: object) -> ExplainOutput:
        compiled = compile(fn, backend="eager")
        compiled(*args, **kwargs)
        return _summarize(compiled)

    return run_and_explain


def _summarize(compiled: CompiledFunction) -> ExplainOutput:
    reports = list(compiled.reports)
    graphs = [graph for report in reports for graph in report.graphs]
    captured = _captured_graphs(compiled)
    breaks = [brk for report in reports for brk in report.graph_breaks]
    return ExplainOutput(
        graph_count=len(graphs),
        graph_break_count=len(breaks),
        breaks=breaks,
        ops_per_graph=[_op_names(captured[id(graph)]) for graph in graphs],
        guards_per_graph=[list(graph.guards) for graph in graphs],
        compile_seconds=sum(report.compile_seconds for report in reports),
        reports=reports,
    )


def _captured_graphs(compiled: CompiledFunction) -> dict[int, Graph]:
    """Each graph report (by identity) -> the IR graph it was compiled from, for every segment."""
    entries = [*compiled.cache, *(entry for segment in compiled.resume_cache.values() for entry in segment)]
    return {id(entry.compiled.report): entry.compiled.graph for entry in entries}


def _op_names(graph: Graph) -> list[str]:
    # a torch_call names the torch function it keeps whole: torch_call(torch.cumsum)
    return [f"torch_call({_function_name(node.args[0])})" if node.op == "torch_call" else node.op
            for node in graph.compute_nodes()]


def _function_name(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', None) or 'torch'}.{getattr(fn, '__name__', fn)}"
