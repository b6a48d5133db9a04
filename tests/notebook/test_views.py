"""Every static view renders the hand-built report and shows what it is for."""

from __future__ import annotations

import re

import pytest

from minicompiler.notebook.views import VIEWS, ReportView, UnknownViewError, report_to_html
from minicompiler.report import MIME_TYPE, CompileReport


def only(report: CompileReport, view: str) -> str:
    return report_to_html(report, [view])


def source_line(html: str, lineno: int) -> str:
    """The HTML of one line of the source view (each line carries the id `<prefix>-L<lineno>`)."""
    return re.search(rf"<span id='mc\w+-L{lineno}'(.*?)(?=<span id=|</pre>)", html).group(1)


def test_full_report_has_every_part_and_no_script(report: CompileReport) -> None:
    html = report_to_html(report)
    assert "<script" not in html  # readable without JavaScript
    for text in ("model", "graph break", "kernel_cos_mul_add", "x: float32[4, 8] contiguous", "<svg"):
        assert text in html
    assert report._repr_html_() == html


def test_source_view_marks_the_break_line_and_kernel_lines(report: CompileReport) -> None:
    html = only(report, "source")
    assert "#fff3cd" in source_line(html, 13) and "print() has side effects" in source_line(html, 13)
    assert "kernel_cos_mul_add" in source_line(html, 11) and "#fff3cd" not in source_line(html, 11)
    assert "hint: move the print out of the function" in html


def test_bytecode_view_marks_each_instruction_with_its_status(report: CompileReport) -> None:
    html = only(report, "bytecode")
    counts = "9 captured, 7 constant, 1 break, 1 not reached"
    assert f"bytecode (<!--python-version-->{counts}<!--/python-version-->)" in html
    # the listing is marked as varying with Python, so stored notebook outputs leave it out of comparisons
    listing = html[html.index("</summary>"):]
    assert listing.count("<!--python-version-->") == 1 and "RETURN_VALUE" in listing.split("<!--python-version-->")[1]
    call_row = re.search(r"<tr valign='top' style='background: #ffd6d6'>.*?</tr>", html).group(0)
    assert "CALL" in call_row and ">13<" in call_row


def test_guards_view_lists_every_guard(report: CompileReport) -> None:
    html = only(report, "guards")
    assert "guards (3)" in html
    for guard in report.graphs[0].guards:
        assert guard.replace("'", "&#x27;") in html


def test_graph_view_prints_and_draws_the_captured_graph(report: CompileReport) -> None:
    html = only(report, "graph")
    assert "softmax" in html and "<svg" in html
    assert html.count("<rect") == 7  # x, w, cos, mul, add, softmax, output


def test_passes_view_diffs_each_stage_against_the_one_before(report: CompileReport) -> None:
    html = only(report, "passes")
    assert "decompose (4.0 ms) &mdash; +7 -2 lines vs capture" in html
    assert "simplify (3.0 ms) &mdash; +2 -3 lines vs decompose" in html
    assert "x*1 -&gt; x" in html  # the rewrite applied, from the stage's notes
    assert re.search(r"#fee2e2[^>]*><span style='color: #999'>- </span>[^\n]{0,200}softmax", html)  # removed


def test_a_stage_name_shows_that_stage_only(report: CompileReport) -> None:
    html = only(report, "simplify")
    assert "simplify (3.0 ms)" in html and "decompose (4.0 ms)" not in html


def test_fusion_view_colours_nodes_by_kernel_and_lists_refusals(report: CompileReport) -> None:
    html = only(report, "fusion")
    assert "fusion (2 kernels, 1 refused)" in html
    assert "add</code> &rarr; <code>amax</code>: amax reduces dims" in html
    fills = dict(re.findall(r"<title>(\w+): kernel_\w+</title><rect [^>]*fill='(#\w+)'", html))
    assert fills["cos"] == fills["mul"] == fills["add"] != fills["amax"] == fills["div"]


def test_code_view_links_each_kernel_to_its_source_lines(report: CompileReport) -> None:
    html = only(report, "code")
    assert re.search(r"href='#mc\w+-L11'>line 11</a>, <a href='#mc\w+-L12'>line 12</a>", html)
    assert "std::cos(in_x[i])" in html and 'font-weight: bold">for</span>' in html  # highlighted C++
    prefix = re.search(r"href='#(mc\w+)-L11'", html).group(1)
    assert f"id='{prefix}-L11'" in report_to_html(report)  # the link's target exists in the full report


def test_timing_view_shows_each_stage_and_run_times(report: CompileReport) -> None:
    html = only(report, "timing")
    assert "compile time (920.0 ms)" in html and "codegen" in html and "900.0 ms" in html
    assert "41.0 µs" in html


def test_training_view_marks_saved_tensors_and_is_empty_without_autograd(report, training_report) -> None:
    assert "<details" not in only(report, "training")  # the summary line only
    html = only(training_report, "training")
    assert "saved for backward: <code>x: float32[4, 8]</code>" in html
    assert "joint" in html and "forward" in html and "backward" in html
    assert html.count("&larr; saved for backward") == 3  # x, on the def line of each of the three graphs


def test_measured_view_shows_times_break_even_and_memory(training_report: CompileReport) -> None:
    html = only(training_report, "measured")
    assert "break-even after" in html and "2.00x" in html and "saved for backward" in html


def test_unknown_view_names_the_choices(report: CompileReport) -> None:
    with pytest.raises(UnknownViewError, match="unknown view.*nope.*choose from source"):
        report_to_html(report, ["nope"])


def test_report_view_carries_the_json_mime_type(report: CompileReport) -> None:
    bundle = ReportView(report, ["fusion"])._repr_mimebundle_()
    assert CompileReport.from_dict(bundle[MIME_TYPE]) == report
    assert "fusion (2 kernels" in bundle["text/html"] and "bytecode" not in bundle["text/html"]


def test_views_render_an_empty_report() -> None:
    html = report_to_html(CompileReport("f"))
    assert "f</code>" in html
    for name in VIEWS:
        report_to_html(CompileReport("f"), [name])


def test_eager_fallback_shows_as_a_highlighted_line() -> None:
    report = CompileReport("f", eager_fallback="Tensor.item() reads a tensor's value")
    assert "runs eagerly: Tensor.item() reads a tensor&#x27;s value" in report_to_html(report)
