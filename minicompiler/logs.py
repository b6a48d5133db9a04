"""Logs: what the compiler did, printed as it happens (the `TORCH_LOGS` of minicompiler).

    MINICOMPILER_LOGS=graph_breaks,recompiles python train.py
    minicompiler.set_logs(graph_breaks=True, output_code=True)    # the same, from Python

Each topic is a standard `logging` logger named "minicompiler.<topic>" that prints to stderr
with its name as a prefix on every line, as TORCH_LOGS does:

    [minicompiler.recompiles] Recompiling function f in /home/me/model.py:12
    [minicompiler.recompiles]     triggered by the following guard failure(s):
    [minicompiler.recompiles]     - guard failed: x.shape[0] == 8 (x)

The compiler calls `emit_compilation(report)` once per finished compilation; everything logged
is read from that CompileReport, so the logs say exactly what the report says. It is also where
`fail_on_recompile()` (recompiles.py) checks each compilation, after logging it.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

from minicompiler import recompiles
from minicompiler.report import CompileReport, GraphReport, StageRecord

TOPICS = ("graph_breaks", "recompiles", "guards", "graph", "output_code")
ENV_VAR = "MINICOMPILER_LOGS"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is at the time of each message (so redirections and
    pytest's capture see the logs), not the stream that was current at import."""

    @property
    def stream(self):  # noqa: ANN201 - logging's own attribute
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass  # always the current sys.stderr


class _PrefixEveryLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return "\n".join(f"[{record.name}] {line}" for line in record.getMessage().splitlines())


def _logger(topic: str) -> logging.Logger:
    return logging.getLogger(f"minicompiler.{topic}")


def _install_handlers() -> None:
    handler = _StderrHandler()
    handler.setFormatter(_PrefixEveryLine())
    for topic in TOPICS:
        logger = _logger(topic)
        logger.addHandler(handler)
        logger.propagate = False  # printed once, by our handler, even if the root logger prints too


def _topics_from_env() -> set[str]:
    names = {name.strip() for name in os.environ.get(ENV_VAR, "").split(",") if name.strip()}
    unknown = names - set(TOPICS)
    if unknown:
        warnings.warn(f"{ENV_VAR}: unknown topic(s) {', '.join(sorted(unknown))}; "
                      f"choose from {', '.join(TOPICS)}", stacklevel=3)
    return names & set(TOPICS)


def set_logs(
    *,
    graph_breaks: bool | None = None,
    recompiles: bool | None = None,
    guards: bool | None = None,
    graph: bool | None = None,
    output_code: bool | None = None,
) -> None:
    """Turn log topics on or off (like torch._logging.set_logs). A topic left out follows the
    MINICOMPILER_LOGS environment variable (off when it is unset), so `set_logs()` resets."""
    chosen = {"graph_breaks": graph_breaks, "recompiles": recompiles, "guards": guards, "graph": graph,
              "output_code": output_code}
    from_env = _topics_from_env()
    for topic, on in chosen.items():
        enabled = topic in from_env if on is None else on
        _logger(topic).setLevel(logging.INFO if enabled else logging.WARNING)


def enabled_topics() -> list[str]:
    return [topic for topic in TOPICS if _logger(topic).isEnabledFor(logging.INFO)]


# --- what each topic says about one compilation --------------------------------------------
def emit_compilation(report: CompileReport) -> None:
    """Log, for one finished compilation, every topic that is enabled; then raise RecompileError
    if it happened inside `fail_on_recompile()`."""
    for topic in enabled_topics():
        for message in _MESSAGES[topic](report):
            _logger(topic).info(message)
    recompiles.check(report)


def _graph_title(report: CompileReport, index: int) -> str:
    return f"graph {index} of {report.function} (captured by {report.frontend})"


def _graph_break_messages(report: CompileReport) -> list[str]:
    messages = [
        f"Graph break in user code at {brk.filename}:{brk.lineno}\n"
        f"    Reason: {brk.reason}" + (f" ({brk.kind})" if brk.kind else "") + "\n"
        f"    User code: {brk.line}" + (f"\n    Hint: {brk.hint}" if brk.hint else "")
        for brk in report.graph_breaks
    ]
    if report.eager_fallback:  # no graph at all: the whole call runs eagerly
        messages.append(f"{report.function} runs eagerly: {report.eager_fallback}")
    return messages


def _recompile_messages(report: CompileReport) -> list[str]:
    if not report.recompile_reason:
        return []
    return [f"Recompiling function {report.function} in {report.filename}:{report.firstlineno}\n"
            f"    triggered by the following guard failure(s):\n"
            f"    - {report.recompile_reason}"]


def _guard_messages(report: CompileReport) -> list[str]:
    return [f"GUARDS for {_graph_title(report, i)}:\n" + "\n".join(f"  {guard}" for guard in graph.guards)
            for i, graph in enumerate(report.graphs)]


def _graph_messages(report: CompileReport) -> list[str]:
    return [f"TRACED GRAPH\n===== {_graph_title(report, i)} =====\n{stage.text}"
            for i, graph in enumerate(report.graphs) for stage in graph.stages if stage.name == "capture"]


def _output_code_messages(report: CompileReport) -> list[str]:
    messages = []
    for i, graph in enumerate(report.graphs):
        messages += [f"Output code ({stage.name}) for {_graph_title(report, i)}:\n{stage.text}"
                     for stage in _codegen_stages(graph)]
        if graph.fallback:
            messages.append(f"{_graph_title(report, i)} runs with torch ops: {graph.fallback}")
    return messages


def _codegen_stages(graph: GraphReport) -> list[StageRecord]:
    # "codegen", or "codegen (forward)" and "codegen (backward)" for a training graph
    return [stage for stage in graph.stages if stage.name.startswith("codegen")]


_MESSAGES = {
    "graph_breaks": _graph_break_messages,
    "recompiles": _recompile_messages,
    "guards": _guard_messages,
    "graph": _graph_messages,
    "output_code": _output_code_messages,
}

_install_handlers()
set_logs()  # topics named in MINICOMPILER_LOGS are on from import
