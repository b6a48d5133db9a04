"""The magics in a real IPython InteractiveShell: options, namespace behaviour, errors, breaks."""

from __future__ import annotations

import re

import pytest
import torch

pytest.importorskip("IPython", reason="the magics need IPython (pip install -e '.[notebook]')")
pytest.importorskip("plotly", reason="--bench charts need plotly (pip install -e '.[notebook]')")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

from minicompiler.report import MIME_TYPE

PLOTLY_MIME = "application/vnd.plotly.v1+json"


@pytest.fixture(scope="module")
def shell() -> InteractiveShell:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "minicompiler.notebook.magics")
    return ip


@pytest.fixture
def ns(shell: InteractiveShell) -> dict:
    shell.user_ns.update(torch=torch, x=torch.randn(4, 8), w=torch.randn(8))
    for name in ("y", "z", "total"):
        shell.user_ns.pop(name, None)
    return shell.user_ns


def run(shell: InteractiveShell, cell: str):
    """Run a cell; return (result, captured output)."""
    with capture_output() as captured:
        result = shell.run_cell(cell)
    return result, captured


def plain(text: str) -> str:
    """Terminal output without its colour codes."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def html_outputs(captured) -> list[str]:
    return [o.data["text/html"] for o in captured.outputs if "text/html" in o.data]


def magics(shell: InteractiveShell):
    return shell.magics_manager.registry["CompileMagics"]


CELL = """%%compile {options}
y = torch.cos(x) * w + 1
z = torch.softmax(y, -1)
z.sum()
"""


def eager(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.cos(x) * w + 1
    return y, torch.softmax(y, -1)


def test_the_cell_value_and_assigned_names_equal_eager_on_fresh_inputs(shell, ns) -> None:
    for _ in range(2):  # a second run compiles a new cell on new random inputs
        ns.update(x=torch.randn(4, 8), w=torch.randn(8))
        result, captured = run(shell, CELL.format(options=""))
        assert result.error_in_exec is None
        y, z = eager(ns["x"], ns["w"])
        torch.testing.assert_close(result.result, z.sum())
        torch.testing.assert_close(ns["y"], y)
        torch.testing.assert_close(ns["z"], z)
    report = magics(shell).last_report
    assert report.source.startswith("y = torch.cos(x) * w + 1") and report.firstlineno == 1
    assert [o for o in captured.outputs if MIME_TYPE in o.data], "the report goes out as its JSON MIME type"
    html = html_outputs(captured)[0]
    assert "kernel_" in html and "y = torch.cos(x) * w + 1" in html
    assert "x: float32[4, 8] contiguous cpu requires_grad=False" in html  # the guards


def test_options_reach_the_compiler_and_pick_the_views(shell, ns) -> None:
    result, captured = run(shell, CELL.format(options="--backend eager --stages guards,capture"))
    assert result.error_in_exec is None
    report = magics(shell).last_report
    assert report.graphs[0].backend == "eager" and [s.name for s in report.graphs[0].stages] == ["capture"]
    html = html_outputs(captured)[0]
    assert "guards (" in html and "captured graph" in html and "bytecode (" not in html


def test_quiet_shows_only_the_value(shell, ns) -> None:
    result, captured = run(shell, CELL.format(options="--quiet --backend eager"))
    assert result.error_in_exec is None and not html_outputs(captured)
    torch.testing.assert_close(result.result, eager(ns["x"], ns["w"])[1].sum())


def test_bench_times_eager_and_compiled_with_charts(shell, ns) -> None:
    result, captured = run(shell, CELL.format(options="--quiet --bench 2"))
    assert result.error_in_exec is None
    report = magics(shell).last_report
    assert {k: len(v) for k, v in report.run_samples.items()} == {"eager": 2, "compiled": 2}
    assert all(seconds > 0 for seconds in report.run_times.values())
    charts = [o for o in captured.outputs if PLOTLY_MIME in o.data]
    assert len(charts) == 2 and "break-even after" in charts[1].data["text/html"]


def test_vs_torch_adds_torch_compile_to_the_timings(shell, ns, monkeypatch) -> None:
    compiled_by_torch = []
    monkeypatch.setattr(torch, "compile", lambda fn: compiled_by_torch.append(fn) or fn)  # no inductor build
    result, captured = run(shell, CELL.format(options="--quiet --backend eager --bench 2 --vs-torch"))
    assert result.error_in_exec is None and len(compiled_by_torch) == 1
    assert list(magics(shell).last_report.run_samples) == ["eager", "compiled", "torch.compile"]


def test_train_measures_what_eager_autograd_saves(shell, ns) -> None:
    ns["x"] = torch.randn(4, 8, requires_grad=True)
    result, captured = run(shell, CELL.format(options="--train --backend eager --stages training"))
    assert result.error_in_exec is None
    assert magics(shell).last_report.graphs[0].saved_bytes["eager"] > 0
    result.result.backward()
    assert ns["x"].grad is not None


def test_a_bad_option_prints_usage_not_a_traceback(shell, ns) -> None:
    result, captured = run(shell, CELL.format(options="--backend tpu"))
    assert result.error_in_exec is None and result.result is None
    assert "usage: %%compile [--backend {auto,cpp,triton,eager}]" in captured.stdout
    assert "invalid choice: 'tpu'" in captured.stdout and "Traceback" not in captured.stdout
    result, captured = run(shell, CELL.format(options="--backend eager --stages nonsense"))
    assert "--stages: unknown view(s) nonsense; choose from source" in captured.stdout


def test_the_magic_documents_its_options(shell) -> None:
    doc = shell.find_cell_magic("compile").__doc__
    for option in ("--backend", "--mode", "--dynamic", "--fullgraph", "--stages", "--bench", "--vs-torch",
                   "--train", "--quiet"):
        assert option in doc


def test_an_error_in_the_cell_shows_the_users_line(shell, ns) -> None:
    result, captured = run(shell, "%%compile\ny = x + 1\nz = y @ torch.ones(5)\n")
    assert isinstance(result.error_in_exec, RuntimeError)
    shown = plain(captured.stdout)
    assert "<minicompiler-cell-" in shown and "z = y @ torch.ones(5)" in shown
    assert "api.py" not in shown and "magics.py" not in shown  # no compiler internals


def test_a_graph_break_is_a_highlighted_line_not_an_error(shell, ns) -> None:
    result, captured = run(shell, "%%compile\ny = torch.cos(x)\nk = y.sum().item()\ny * k\n")
    assert result.error_in_exec is None
    y = torch.cos(ns["x"])
    torch.testing.assert_close(result.result, y * y.sum().item())
    html = html_outputs(captured)[0]
    assert "graph break at" in html and "background: #fff3cd" in html and "item" in html


def test_fullgraph_makes_a_break_an_error_without_compiler_traceback(shell, ns) -> None:
    result, captured = run(shell, "%%compile --fullgraph\nk = x.sum().item()\n")
    assert type(result.error_in_exec).__name__ == "GraphBreakError"
    shown = plain(captured.stdout)
    assert "api.py" not in shown and "fullgraph=True" in shown and "k = x.sum().item()" in shown


def test_line_magics_explain_bench_and_show_the_last_report(shell, ns) -> None:
    ns["double_cos"] = lambda t: torch.cos(torch.cos(t))
    _, captured = run(shell, "%compile_explain --stages fusion double_cos(x)")
    report = magics(shell).last_report
    assert "fusion (" in html_outputs(captured)[0] and len(report.graphs[0].kernels) == 1
    _, captured = run(shell, "%compile_bench -n 2 double_cos(x)")
    assert len(magics(shell).last_report.run_samples["eager"]) == 2
    assert PLOTLY_MIME in captured.outputs[0].data
    _, captured = run(shell, "%compile_report --stages timing")
    assert "compile time (" in html_outputs(captured)[0]
    _, captured = run(shell, "%compile_report --charts")
    titles = [o.data[PLOTLY_MIME]["layout"]["title"]["text"] for o in captured.outputs]
    assert titles[:2] == ["compile time per stage", "time per call"]
    _, captured = run(shell, "%compile_explain 1 +")
    assert "UsageError: expected a call like f(x)" in captured.stderr  # IPython prints it, no traceback


def test_train_shows_the_joint_forward_and_backward_graphs_and_gradients_match_eager(shell, ns) -> None:
    ns["x"] = torch.randn(64, requires_grad=True)
    cell = "%%compile --train --stages training,measured\nb = torch.cos(torch.cos(x))\nb.sum()\n"
    result, captured = run(shell, cell)
    assert result.error_in_exec is None
    graph = magics(shell).last_report.graphs[0]
    assert [stage.name for stage in graph.autograd] == ["joint", "forward", "backward"]
    html = html_outputs(captured)[0]
    assert "training: joint / forward / backward" in html and "saved for backward" in html
    assert graph.saved_bytes["eager"] > 0 and graph.saved_tensors
    result.result.backward()
    x = ns["x"].detach()
    torch.testing.assert_close(ns["x"].grad, torch.sin(torch.cos(x)) * torch.sin(x))
