"""Effects outside the graph: logging calls and warnings.warn are recorded at capture time and made
after each run of the graph (no graph break), with eager's logger levels, handlers, warning
filters and source line; attribute writes on outside objects are made the same way."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

import minicompiler

logger = logging.getLogger("minicompiler.tests.side_effects")


def logs_a_warning(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    logger.warning("scaling %d rows", x.shape[0])
    return y * 2


def warns(x: torch.Tensor) -> torch.Tensor:
    y = x.cos()
    warnings.warn("this layer is deprecated", DeprecationWarning, stacklevel=1)  # the line eager's warning names
    return y + 1


def deprecated_helper(x: torch.Tensor) -> torch.Tensor:
    warnings.warn("use something else", FutureWarning, stacklevel=2)  # names its caller's line
    return x * 3


def calls_a_deprecated_helper(x: torch.Tensor) -> torch.Tensor:
    return deprecated_helper(x.sin())


def logs_a_tensor(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    logger.warning("mean is %s", y.mean())  # the value exists only once the graph has run
    return y


class OnceLogger(logging.Logger):
    """transformers' `logger.warning_once`: a method a library adds to its loggers."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.seen: set[str] = set()

    def warning_once(self, message: str) -> None:
        if message not in self.seen:
            self.seen.add(message)
            self.warning(message)


once_logger = OnceLogger("minicompiler.tests.once")
once_logger.parent = logging.getLogger()  # made outside getLogger: it still propagates to the root


def warns_once(x: torch.Tensor) -> torch.Tensor:
    once_logger.warning_once("only the first call says this")
    return x.exp()


def checks_the_level(x: torch.Tensor) -> torch.Tensor:
    if logger.isEnabledFor(logging.DEBUG):  # a question: answered now, like any Python call
        return x + 1
    return x - 1


def test_a_logging_call_is_made_after_the_graph_on_every_call(caplog: pytest.LogCaptureFixture) -> None:
    compiled = minicompiler.compile(logs_a_warning)
    for rows in (3, 3):
        x = torch.randn(rows, 4)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=logger.name):
            torch.testing.assert_close(compiled(x), logs_a_warning(x))
        assert [r.getMessage() for r in caplog.records] == [f"scaling {rows} rows"] * 2  # compiled, then eager
    assert len(compiled.report.graphs) == 1 and not compiled.report.graph_breaks


def test_the_logger_level_at_run_time_decides(caplog: pytest.LogCaptureFixture) -> None:
    compiled = minicompiler.compile(logs_a_warning)
    x = torch.randn(2, 4)
    with caplog.at_level(logging.ERROR, logger=logger.name):
        compiled(x)
    assert not caplog.records


def test_warnings_warn_names_the_line_eager_names() -> None:
    compiled = minicompiler.compile(warns)
    x = torch.randn(3)
    with pytest.warns(DeprecationWarning, match="deprecated") as expected:
        eager_result = warns(x)
    for _ in range(2):  # the first call compiles, the second runs the cached graph
        with pytest.warns(DeprecationWarning, match="deprecated") as got:
            torch.testing.assert_close(compiled(x), eager_result)
        assert (got[0].filename, got[0].lineno) == (expected[0].filename, expected[0].lineno)
    assert len(compiled.report.graphs) == 1 and not compiled.report.graph_breaks


def test_a_warning_with_stacklevel_names_the_callers_line() -> None:
    compiled = minicompiler.compile(calls_a_deprecated_helper)
    x = torch.randn(3)
    with pytest.warns(FutureWarning) as expected:
        eager_result = calls_a_deprecated_helper(x)
    with pytest.warns(FutureWarning) as got:
        torch.testing.assert_close(compiled(x), eager_result)
    assert (got[0].filename, got[0].lineno) == (expected[0].filename, expected[0].lineno)
    assert not compiled.report.graph_breaks


def test_a_library_logger_method_is_made_after_the_graph(caplog: pytest.LogCaptureFixture) -> None:
    compiled = minicompiler.compile(warns_once)
    with caplog.at_level(logging.WARNING, logger=once_logger.name):
        for _ in range(3):
            x = torch.randn(4)
            torch.testing.assert_close(compiled(x), x.exp())
    assert [r.getMessage() for r in caplog.records] == ["only the first call says this"]
    assert not compiled.report.graph_breaks


def test_logging_a_tensor_breaks_the_graph_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    compiled = minicompiler.compile(logs_a_tensor)
    x = torch.randn(5)
    with caplog.at_level(logging.WARNING, logger=logger.name):
        torch.testing.assert_close(compiled(x), x.sin())
    assert any("mean is" in r.getMessage() for r in caplog.records)
    reasons = " ".join(b.reason for b in compiled.report.graph_breaks)
    assert "tensor" in reasons


def test_a_logger_question_is_answered_at_capture_time() -> None:
    compiled = minicompiler.compile(checks_the_level)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), checks_the_level(x))
    assert not compiled.report.graph_breaks
