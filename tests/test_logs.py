"""Logs (MINICOMPILER_LOGS / set_logs): each topic prints what the real compiler's report says."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import minicompiler
from minicompiler import logs


@pytest.fixture(autouse=True)
def logs_off(monkeypatch):
    monkeypatch.delenv(logs.ENV_VAR, raising=False)
    logs.set_logs()
    yield
    monkeypatch.delenv(logs.ENV_VAR, raising=False)  # before the reset, which reads it
    logs.set_logs()


def with_print(x):
    y = torch.cos(x)
    print("between graphs")
    return torch.sin(y)


def compile_and_run(fn, *args, backend: str = "eager") -> minicompiler.CompiledFunction:
    compiled = minicompiler.compile(fn, backend=backend)
    torch.testing.assert_close(compiled(*args), fn(*args))
    return compiled


def logged(capsys, topic: str) -> list[str]:
    """The lines `topic` printed to stderr, without their prefix."""
    prefix = f"[minicompiler.{topic}] "
    return [line.removeprefix(prefix) for line in capsys.readouterr().err.splitlines() if line.startswith(prefix)]


def test_graph_breaks_name_file_line_and_reason(capsys):
    logs.set_logs(graph_breaks=True)
    report = compile_and_run(with_print, torch.randn(8)).report
    logs.emit_compilation(report)
    lines = logged(capsys, "graph_breaks")
    brk = report.graph_breaks[0]
    assert f"Graph break in user code at {__file__}:{brk.lineno}" in lines
    assert any(brk.reason in line for line in lines)
    assert any("print(" in line for line in lines)


def test_recompiles_say_which_guard_failed(capsys):
    logs.set_logs(recompiles=True)
    compiled = minicompiler.compile(lambda x: x * 2, backend="eager")
    compiled(torch.randn(8))  # compiling logs as it happens
    assert logged(capsys, "recompiles") == []  # the first compilation is no recompile
    compiled(torch.randn(3, 2))
    second = compiled.reports[-1]
    lines = logged(capsys, "recompiles")
    assert lines[0].startswith("Recompiling function")
    assert any(second.recompile_reason in line for line in lines)


def test_guards_and_graph_print_each_graph(capsys):
    logs.set_logs(guards=True, graph=True)
    report = compile_and_run(with_print, torch.randn(8)).report
    logs.emit_compilation(report)
    err = capsys.readouterr().err
    for graph in report.graphs:
        for guard in graph.guards:
            assert f"[minicompiler.guards]   {guard}" in err
        for line in graph.stage("capture").text.splitlines():
            assert f"[minicompiler.graph] {line}" in err


def test_output_code_prints_the_generated_source(capsys):
    logs.set_logs(output_code=True)
    report = compile_and_run(lambda x: torch.cos(torch.cos(x)), torch.randn(16), backend="cpp").report
    logs.emit_compilation(report)
    lines = logged(capsys, "output_code")
    assert any(line.startswith("Output code (codegen)") for line in lines)
    for kernel in report.graphs[0].kernels:
        assert any(kernel.name in line for line in lines)


def test_output_code_of_a_training_graph_has_forward_and_backward(capsys):
    logs.set_logs(output_code=True)
    x = torch.randn(16, requires_grad=True)
    compiled = minicompiler.compile(lambda t: torch.sin(t) * t, backend="cpp")
    compiled(x).sum().backward()
    expected = torch.autograd.grad((torch.sin(x) * x).sum(), x)[0]
    torch.testing.assert_close(x.grad, expected)
    logs.emit_compilation(compiled.report)
    lines = logged(capsys, "output_code")
    assert any(line.startswith("Output code (codegen (forward))") for line in lines)
    assert any(line.startswith("Output code (codegen (backward))") for line in lines)


def test_topics_are_off_unless_asked_for(capsys):
    report = compile_and_run(with_print, torch.randn(8)).report
    logs.emit_compilation(report)
    assert "[minicompiler." not in capsys.readouterr().err
    logs.set_logs(graph=True)
    logs.set_logs(graph=False)
    logs.emit_compilation(report)
    assert "[minicompiler." not in capsys.readouterr().err


def test_unknown_topic_in_the_environment_warns(monkeypatch):
    monkeypatch.setenv(logs.ENV_VAR, "graph_breaks,bytecode")
    with pytest.warns(UserWarning, match="bytecode"):
        logs.set_logs()
    assert logs.enabled_topics() == ["graph_breaks"]


REPO = Path(__file__).resolve().parents[1]
SCRIPT = textwrap.dedent("""
    import torch, minicompiler
    from minicompiler import logs

    def f(x):
        y = torch.cos(x)
        print("between graphs")
        return torch.sin(y)

    compiled = minicompiler.compile(f, backend="eager")
    x = torch.randn(4)
    assert torch.equal(compiled(x), f(x))
    logs.emit_compilation(compiled.report)
""")


def test_environment_variable_turns_topics_on_at_import():
    env = {**os.environ, logs.ENV_VAR: "graph_breaks,guards"}
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=REPO, capture_output=True, text=True,
                            timeout=120, check=True)
    assert "[minicompiler.graph_breaks] Graph break in user code at <string>:" in result.stderr
    assert "[minicompiler.guards] GUARDS for graph 1 of f" in result.stderr
    assert "[minicompiler.graph]" not in result.stderr
