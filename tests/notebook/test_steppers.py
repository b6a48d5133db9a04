"""Steppers and widgets driven programmatically: next()/previous(), their state and HTML."""

from __future__ import annotations

import pytest

from minicompiler.notebook.steppers import BytecodeStepper, FusionStepper
from minicompiler.notebook.widgets import CrossLinks, StageTabs
from minicompiler.report import CompileReport

ipywidgets = pytest.importorskip("ipywidgets", reason="needs ipywidgets (pip install -e '.[notebook]')")


def test_bytecode_stepper_walks_the_trace(report: CompileReport) -> None:
    stepper = BytecodeStepper(report)
    assert stepper.count == len(report.trace) == 9 and stepper.index == 0
    assert stepper.previous() == 0  # clamped at the start
    for _ in range(4):
        stepper.next()
    assert stepper.step.opname == "CALL" and "cos = ops.cos(x)" in stepper.html
    assert "TensorVariable(cos: float32[4, 8])" in stepper.html  # the stack after the call
    assert "background: #dcfce7'>cos = ops.cos(x)</span>" in stepper.html  # the node this step added
    stepper.next()
    assert "y</code>" in stepper.html  # STORE_FAST y: a new local
    assert "background: #dcfce7'>cos = ops.cos(x)" not in stepper.html  # no longer new
    stepper.go(100)
    assert stepper.index == 8 and "mul = ops.mul(cos, w)" in stepper.html
    assert stepper.previous() == 7


def test_bytecode_stepper_widget_follows_the_index(report: CompileReport) -> None:
    stepper = BytecodeStepper(report)
    box = stepper.widget
    controls, pane = box.children
    back, forward, slider = controls.children
    forward.click()
    forward.click()
    assert stepper.index == 2 and slider.value == 2 and pane.value == stepper.html
    slider.value = 6
    assert stepper.index == 6 and pane.value == stepper.html
    back.click()
    assert stepper.index == 5
    bundle = stepper._repr_mimebundle_()  # live widget, with the current state as static HTML
    assert "application/vnd.jupyter.widget-view+json" in bundle and bundle["text/html"] == stepper.html
    assert bundle["text/plain"] == "<BytecodeStepper: instruction 6 of 9>"


def test_fusion_stepper_merges_kernels_one_decision_at_a_time(report: CompileReport) -> None:
    stepper = FusionStepper(report)
    assert stepper.count == len(report.graphs[0].fusion) + 1
    assert len(stepper.groups()) == 8 and "before fusion" in stepper.html
    stepper.next()
    assert stepper.groups()[0] == ["cos", "mul"] and "fused" in stepper.html
    stepper.next()
    stepper.next()  # add -> amax: refused
    assert "not fused" in stepper.html and "another loop" in stepper.html
    assert ["cos", "mul", "add"] in stepper.groups() and ["amax"] in stepper.groups()
    stepper.go(stepper.count - 1)
    final = [k.nodes for k in report.graphs[0].kernels]
    assert stepper.groups() == final  # the replay ends with the scheduler's kernels
    stepper.previous()
    assert len(stepper.groups()) == 3


def test_stage_tabs_have_a_tab_per_view_and_stage(report: CompileReport) -> None:
    tabs = StageTabs(report)
    assert tabs.titles[:3] == ["source", "bytecode", "guards"]
    assert tabs.titles[-5:] == ["capture", "decompose", "simplify", "fuse", "codegen"]
    assert "training" not in tabs.titles  # no content, no tab
    tab = tabs.widget
    assert isinstance(tab, ipywidgets.Tab) and len(tab.children) == tabs.count
    tabs.go(tabs.titles.index("decompose"))
    assert tab.selected_index == tabs.index and "#dcfce7" in tabs.html  # the diff's added lines
    tab.selected_index = 0
    assert tabs.index == 0
    tabs.next()
    assert tabs.titles[tabs.index] == "bytecode"


def test_cross_links_follow_a_line_to_its_bytecode_nodes_kernels_and_code(report: CompileReport) -> None:
    links = CrossLinks(report)
    assert links.lines == list(range(10, 15)) and links.selected == {10}
    links.select_line(12)
    linked = links.linked()
    assert links.index == 2 and linked.kernels == ["kernel_cos_mul_add"]
    assert [report.bytecode[i].opname for i in linked.instructions] == [
        "LOAD_FAST", "LOAD_FAST", "BINARY_OP", "LOAD_CONST", "BINARY_OP", "STORE_FAST"]
    assert linked.nodes["decompose"] == ["mul", "add"] and linked.stage_lines["decompose"] == {3, 4}
    assert linked.generated_lines == {"kernel_cos_mul_add": {2, 3}}  # `// mul = ... <- cell.py:12`
    assert "background: #fde68a'><span style='color: #999'>   3 </span>" in links.html
    links.next()
    assert links.selected == {13} and links.linked().kernels == []
    links.select_kernel("kernel_amax_sub_exp_sum_div")  # and back: a kernel's source lines
    assert links.selected == {14} and links.linked().kernels == ["kernel_amax_sub_exp_sum_div"]
    with pytest.raises(ValueError, match="line 99 is not in model"):
        links.select_line(99)


def test_cross_links_read_provenance_from_the_printed_graph_when_none_was_recorded(report) -> None:
    expected = CrossLinks(report)
    expected.select_line(14)
    for stage in report.graphs[0].stages:
        stage.node_lines = {}  # the printer's `cell.py:14` comments still say where each node came from
    links = CrossLinks(report)
    links.select_line(14)
    assert links.linked() == expected.linked()
    assert links.linked().nodes["simplify"] == ["amax", "sub", "exp", "sum", "div"]


def test_cross_links_widget_goes_back_from_a_kernel_menu(report: CompileReport) -> None:
    links = CrossLinks(report)
    menu, box = links.widget.children
    menu.value = "kernel_cos_mul_add"
    assert links.selected == {11, 12} and box.children[1].value == links.html
    assert links.html.count("background: #fde68a'><span style='color: #999'>") >= 2  # both source lines
    controls, _ = box.children
    controls.children[1].click()  # next line: back to one selected line
    assert links.selected == {11}


def test_a_stepper_with_nothing_to_replay_says_why(report) -> None:
    report.trace = []  # e.g. a whole-call eager fallback
    stepper = BytecodeStepper(report)
    assert stepper.count == 0 and "no trace" in stepper.html
    assert stepper.next() == 0 and stepper.previous() == 0
    assert stepper._repr_mimebundle_()["text/plain"] == "<BytecodeStepper: empty>"
