"""Charts: plotly figures with the numbers of the report, and their HTML-table twins."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("plotly", reason="the charts need plotly (pip install -e '.[notebook]')")
from minicompiler.notebook.charts import (  # noqa: E402
    PLOTLY_MIME,
    Chart,
    break_even_calls,
    break_even_figure,
    compile_time_figure,
    compile_time_table,
    memory_figure,
    memory_table,
    report_charts,
    timing_figure,
    timing_table,
)
from minicompiler.report import CompileReport


def test_timing_bars_have_medians_and_min_max_spread(report: CompileReport) -> None:
    fig = timing_figure([report, report])
    eager, compiled = fig.data
    assert eager.name == "eager" and list(eager.x) == ["model", "model"]
    assert eager.y[0] == pytest.approx(41.0) and eager.error_y.array[0] == pytest.approx(2.0)
    assert eager.error_y.arrayminus[0] == pytest.approx(1.0) and compiled.y[0] == pytest.approx(12.0)
    assert "41.0 (40.0&ndash;43.0)" in timing_table(report)


def test_compile_time_is_stacked_per_stage(report: CompileReport) -> None:
    fig = compile_time_figure(report)
    assert [bar.name for bar in fig.data] == ["capture", "decompose", "simplify", "fuse", "codegen"]
    assert fig.layout.barmode == "stack" and fig.data[-1].y[0] == pytest.approx(900.0)
    assert "920.0" in compile_time_table(report)  # the total


def test_break_even_is_compile_time_over_time_saved_per_call(report: CompileReport) -> None:
    calls = break_even_calls(report)
    assert calls == pytest.approx(0.92 / (4.1e-5 - 1.2e-5))
    fig = break_even_figure(report)
    eager, compiled = fig.data
    crossing = next(i for i, (e, c) in enumerate(zip(eager.y, compiled.y, strict=True)) if c <= e)
    assert eager.x[crossing] >= calls > eager.x[crossing - 1]
    report.run_times["compiled"] = 1.0
    assert break_even_calls(report) == math.inf


def test_memory_chart_compares_moved_with_minimum_and_saved_bytes(training_report: CompileReport) -> None:
    fig = memory_figure(training_report)
    assert [bar.name for bar in fig.data][:2] == ["bytes moved", "minimum"]
    assert list(fig.data[0].y) == [288, 512] and list(fig.data[1].y) == [288, 256]
    saved = {bar.name for bar in fig.data[2:]}
    assert saved == {"saved for backward (eager)", "saved for backward (compiled)"}
    assert "2.00x" in memory_table(training_report)


def test_chart_output_has_plotly_json_and_a_static_table(report: CompileReport) -> None:
    bundle = Chart(timing_figure(report), timing_table(report))._repr_mimebundle_()
    assert bundle[PLOTLY_MIME]["data"][0]["type"] == "bar"
    assert "<table" in bundle["text/html"] and "<script" not in bundle["text/html"]
    assert len(report_charts(report)) == 4
    assert len(report_charts(CompileReport("f"))) == 1  # only compile time: nothing was measured
