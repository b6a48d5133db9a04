"""Widgets that need a real compilation: the guard what-if and C++/Triton side by side."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("ipywidgets", reason="the widgets need ipywidgets (pip install -e '.[notebook]')")

import minicompiler.api as api
from minicompiler.notebook.whatif import GuardWhatIf
from minicompiler.notebook.widgets import KernelSideBySide


def scaled_cos(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.cos(x) * w + 1


@pytest.fixture
def compiled() -> api.CompiledFunction:
    fn = api.compile(scaled_cos, backend="cpp")
    x, w = torch.randn(4, 8), torch.randn(8)
    torch.testing.assert_close(fn(x, w), scaled_cos(x, w))
    return fn


def test_what_if_names_the_failing_guard_and_diffs_the_recompiled_graph(compiled) -> None:
    x, w = torch.randn(4, 8), torch.randn(8)
    what_if = GuardWhatIf(compiled, x, w)
    assert what_if.count == 2 and what_if.index == 0 and what_if.failing_guard is None
    outcome = what_if.change(shape=(16, 8))
    assert outcome.failing_guard == "x: float32[4, 8] contiguous cpu requires_grad=False"
    assert outcome.report.graphs[0].guards[0].startswith("x: float32[16, 8]")
    html = what_if.html
    assert "guard fails" in html and "float32[16, 8]" in html and "#fee2e2" in html  # old line removed
    assert len(compiled.cache) == 1  # the user's compiled function is untouched
    what_if.next()
    outcome = what_if.change(dtype=torch.float64)
    assert outcome.failing_guard.startswith("w: float32[8]")
    assert outcome.change == "w: float32[8] requires_grad=False -> float64[8] requires_grad=False"
    outcome = what_if.change(requires_grad=False)  # no change at all: the cached code is reused
    assert outcome.failing_guard is None and "every guard holds" in what_if.html
    what_if.previous()
    assert what_if.change(requires_grad=True).failing_guard.endswith("requires_grad=False")


def test_what_if_reports_an_input_the_function_rejects(compiled) -> None:
    what_if = GuardWhatIf(compiled, torch.randn(4, 8), torch.randn(8))
    outcome = what_if.change(shape=(4, 5))
    assert outcome.failing_guard is not None and "RuntimeError" in outcome.error
    assert "the function itself fails" in what_if.html


def test_side_by_side_shows_each_kernel_in_cpp_and_triton(compiled) -> None:
    side = KernelSideBySide(compiled)
    assert side.count == 1
    sources = side.sources(0)
    assert "std::cos" in sources["cpp"]
    assert "@triton.jit" in sources["triton"] and "tl.cos" in sources["triton"]
    assert "C++" in side.html and "Triton" in side.html
    assert side.next() == 0  # only one kernel
    with pytest.raises(ValueError, match="has been called"):
        KernelSideBySide(api.compile(scaled_cos))


def test_cross_links_on_a_real_compile_reach_the_generated_lines(compiled) -> None:
    from minicompiler.notebook.widgets import CrossLinks

    links = CrossLinks(compiled.report)
    body_line = compiled.report.firstlineno + 1  # `return torch.cos(x) * w + 1`
    links.select_line(body_line)
    linked = links.linked()
    assert linked.nodes["capture"] == ["cos", "mul", "add"]
    assert [compiled.report.graphs[0].kernels[0].name] == linked.kernels
    assert all(lines for lines in linked.generated_lines.values())


def test_what_if_widget_tries_the_change_typed_into_it(compiled) -> None:
    what_if = GuardWhatIf(compiled, torch.randn(4, 8), torch.randn(8))
    controls, stepper = what_if.widget.children
    shape, dtype, requires_grad, training, try_it = controls.children
    shape.value = "(2, 8)"
    try_it.click()
    assert what_if.outcome.change.startswith("x: float32[4, 8]") and what_if.failing_guard.startswith("x:")
    assert stepper.children[1].value == what_if.html  # the pane shows the outcome
    shape.value, requires_grad.value = "", "True"
    try_it.click()
    assert what_if.failing_guard.endswith("requires_grad=False")
    assert what_if.outcome.change.endswith("float32[4, 8] requires_grad=True")
