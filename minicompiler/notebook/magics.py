"""IPython magics: `%%compile` a cell, `%compile_explain f(x)`, `%compile_bench f(x)`, `%compile_report`.

    %load_ext minicompiler
    %%compile --backend cpp --stages source,fusion
    y = torch.cos(torch.cos(x))
    y.sum()

The cell runs as a compiled function of the tensors, modules and arrays it reads (see cell.py);
its value is the cell's output and the names it assigns land in the namespace, as without the
magic. The report shows under the cell, as static HTML plus the report's JSON MIME type.
"""

from __future__ import annotations

import argparse
import ast
import functools
import linecache
import types
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from minicompiler.api import MODES
from minicompiler.notebook.cell import cell_function
from minicompiler.notebook.charts import (
    Chart,
    break_even_figure,
    break_even_table,
    report_charts,
    timing_figure,
    timing_table,
)
from minicompiler.notebook.measure import eager_saved_bytes, time_calls
from minicompiler.notebook.views import ReportView, UnknownViewError
from minicompiler.report import CompileReport

BACKENDS = ("auto", "cpp", "triton", "eager")


def _compiler() -> Any:
    import minicompiler.api  # imported on use: loading the extension stays fast

    return minicompiler.api


def _user_traceback(tb: types.TracebackType | None, filename: str) -> types.TracebackType | None:
    """The traceback from the first frame in the user's cell on, or None if it never got there
    (then the error is the compiler's own and its whole traceback is worth seeing)."""
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    return tb


def _show_as_user_error(shell: InteractiveShell, error: BaseException, filename: str) -> None:
    """Make IPython print `error` as if the uncompiled cell raised it: starting at the user's line."""
    user_tb = _user_traceback(error.__traceback__, filename)
    if user_tb is not None:
        stb = shell.InteractiveTB.structured_traceback(type(error), error, user_tb)
        error._render_traceback_ = lambda: stb  # type: ignore[attr-defined]  # read by showtraceback


def _show_without_traceback(shell: InteractiveShell, error: BaseException) -> None:
    """The compiler refusing (e.g. a graph break under --fullgraph) is a message, not a crash."""
    only = shell.InteractiveTB.get_exception_only(type(error), error)
    error._render_traceback_ = lambda: only  # type: ignore[attr-defined]


@magics_class
class CompileMagics(Magics):
    def __init__(self, shell: InteractiveShell):
        super().__init__(shell)
        self.last_report: CompileReport | None = None  # what %compile_report shows
        self.cell_runs = 0

    # -- %%compile ---------------------------------------------------------------------------
    @magic_arguments("%compile")  # IPython adds one "%": usage then reads "%%compile ..."
    @argument("--backend", choices=BACKENDS, default="auto",
              help="code generator (auto: C++ on CPU, Triton on GPU)")
    @argument("--mode", choices=MODES, default="default", help="compile mode")
    @argument("--dynamic", action="store_true", help="do not specialise on input shapes")
    @argument("--fullgraph", action="store_true", help="make a graph break an error")
    @argument("--stages", default=None, metavar="A,B,...",
              help="views to show: source, bytecode, guards, graph, passes, training, fusion, code, timing, "
                   "measured, or a stage name (decompose, simplify, ...); default: all")
    @argument("--bench", nargs="?", type=int, const=10, default=None, metavar="N",
              help="time eager against compiled, N samples (default 10)")
    @argument("--vs-torch", action="store_true", help="with --bench, also time torch.compile")
    @argument("--train", action="store_true",
              help="show the joint / forward / backward graphs (runs the cell once more, eagerly, to "
                   "measure what autograd saves)")
    @argument("--quiet", action="store_true", help="show only the cell's value, no report")
    @cell_magic
    def compile(self, line: str, cell: str) -> Any:
        """Compile this cell with minicompiler, run it, and show what the compiler did.

        The cell is the body of a function whose inputs are the tensors, modules and arrays it
        reads from the notebook; its last expression is the output and the names it assigns
        are set in the notebook, as when the cell runs without the magic.
        """
        args = self._parse(self.compile, line)
        if args is None:
            return None
        namespace = self.shell.user_ns
        name, filename = self._cell_names(cell)
        cell_fn = cell_function(cell, namespace, name, filename)
        compiled = _compiler().compile(cell_fn.function, backend=args.backend, mode=args.mode,
                                       dynamic=args.dynamic or None, fullgraph=args.fullgraph)
        inputs = cell_fn.arguments(namespace)
        try:
            value, assigned = compiled(*inputs)
        except _compiler().GraphBreakError as error:  # --fullgraph: show where it broke, then fail
            self._show(self._remember(compiled, cell_fn.source), args.stages)
            _show_without_traceback(self.shell, error)
            raise
        except Exception as error:
            _show_as_user_error(self.shell, error, cell_fn.filename)
            raise
        namespace.update(assigned)
        report = self._remember(compiled, cell_fn.source)
        if args.train:
            self._measure_saved(report, cell_fn.function, inputs)
        if not args.quiet:
            self._show(report, args.stages)
        if args.bench is not None:
            self._bench(report, cell_fn.function, compiled, inputs, args.bench, args.vs_torch)
        return value

    def _cell_names(self, cell: str) -> tuple[str, str]:
        """("cell_3", "<minicompiler-cell-3>") for In[3]; a cell run again with other text (or
        run outside a notebook's history) gets a suffix, so older reports keep their lines."""
        self.cell_runs += 1
        number = str(self.shell.execution_count)
        known = linecache.cache.get(f"<minicompiler-cell-{number}>")
        if known is not None and "".join(known[2]) != cell:
            number += f"_{self.cell_runs}"
        return f"cell_{number}", f"<minicompiler-cell-{number}>"

    def _parse(self, magic: Callable[..., Any], line: str) -> argparse.Namespace | None:
        """The magic's options; None (after printing its usage and the error) if they are bad."""
        try:
            return parse_argstring(magic, line)
        except UsageError as error:
            usage = magic.parser.format_usage().lstrip(":").strip()  # type: ignore[attr-defined]
            print(f"usage: {usage}\nerror: {error}")
        except SystemExit:  # argparse exits after printing --help
            pass
        return None

    def _show(self, report: CompileReport, stages: str | None) -> None:
        try:
            display(ReportView(report, stages.split(",") if stages else None))
        except UnknownViewError as error:
            print(f"--stages: {error}")

    def _remember(self, compiled: Any, source: str | None = None) -> CompileReport:
        report = compiled.report
        if source is not None:  # the cell's function has no file of its own: show the cell
            report.source, report.firstlineno = source, 1
        self.last_report = report
        return report

    @staticmethod
    def _measure_saved(report: CompileReport, fn: Callable[..., Any], inputs: tuple[Any, ...]) -> None:
        saved = eager_saved_bytes(fn, inputs)
        for graph in report.graphs:
            graph.saved_bytes["eager"] = saved
        if not any(g.autograd for g in report.graphs):
            print("--train: no graph needed gradients (give an input requires_grad=True to see the "
                  "joint / forward / backward graphs)")

    @staticmethod
    def _bench(report: CompileReport, eager: Callable[..., Any], compiled: Callable[..., Any],
               inputs: tuple[Any, ...], samples: int, vs_torch: bool) -> None:
        functions = {"eager": eager, "compiled": compiled}
        if vs_torch:
            import torch

            functions["torch.compile"] = torch.compile(eager)
        time_calls(report, functions, inputs, samples)
        display(Chart(timing_figure(report), timing_table(report)))
        display(Chart(break_even_figure(report), break_even_table(report)))

    # -- line magics ---------------------------------------------------------------------------
    def _evaluate_call(self, text: str) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
        """`f(x, y=2)` evaluated in the notebook's namespace: (f, args, kwargs)."""
        try:
            call = ast.parse(text.strip(), mode="eval").body
        except SyntaxError as error:
            raise UsageError(f"expected a call like f(x), got {text.strip()!r}") from error
        if not isinstance(call, ast.Call) or any(isinstance(a, ast.Starred) for a in call.args):
            raise UsageError(f"expected a call like f(x), got {text.strip()!r}")

        def evaluate(node: ast.expr) -> Any:
            return eval(compile(ast.Expression(node), "<minicompiler-call>", "eval"), self.shell.user_ns)

        kwargs = {k.arg: evaluate(k.value) for k in call.keywords if k.arg is not None}
        return evaluate(call.func), tuple(evaluate(a) for a in call.args), kwargs

    def _compiled(self, fn: Callable[..., Any], backend: str) -> Any:
        api = _compiler()
        return fn if isinstance(fn, (api.CompiledFunction, api.CompiledModule)) else api.compile(fn, backend=backend)

    @magic_arguments()
    @argument("--backend", choices=BACKENDS, default="auto", help="code generator")
    @argument("--stages", default=None, metavar="A,B,...", help="views to show (see %%compile?)")
    @argument("call", nargs=argparse.REMAINDER, help="the call to explain, e.g. f(x)")
    @line_magic
    def compile_explain(self, line: str) -> None:
        """Compile and run one call, e.g. `%compile_explain f(x)`, and show what the compiler did."""
        args = self._parse(self.compile_explain, line)
        if args is None:
            return
        fn, call_args, kwargs = self._evaluate_call(" ".join(args.call))
        compiled = self._compiled(fn, args.backend)
        compiled(*call_args, **kwargs)
        self._show(self._remember(compiled), args.stages)

    @magic_arguments()
    @argument("-n", type=int, default=10, help="number of timing samples")
    @argument("--backend", choices=BACKENDS, default="auto", help="code generator")
    @argument("--vs-torch", action="store_true", help="also time torch.compile")
    @argument("call", nargs=argparse.REMAINDER, help="the call to time, e.g. f(x)")
    @line_magic
    def compile_bench(self, line: str) -> None:
        """Time one call eager against compiled, e.g. `%compile_bench f(x)`, with a chart."""
        args = self._parse(self.compile_bench, line)
        if args is None:
            return
        fn, call_args, kwargs = self._evaluate_call(" ".join(args.call))
        compiled = self._compiled(fn, args.backend)
        eager = getattr(compiled, "fn", fn)
        compiled(*call_args, **kwargs)
        report = self._remember(compiled)
        eager, compiled = functools.partial(eager, **kwargs), functools.partial(compiled, **kwargs)
        self._bench(report, eager, compiled, call_args, args.n, args.vs_torch)

    @magic_arguments()
    @argument("--stages", default=None, metavar="A,B,...", help="views to show (see %%compile?)")
    @argument("--charts", action="store_true", help="show its charts (compile time, timings, memory)")
    @line_magic
    def compile_report(self, line: str) -> None:
        """Show the last report of %%compile, %compile_explain or %compile_bench again."""
        args = self._parse(self.compile_report, line)
        if args is None:
            return
        if self.last_report is None:
            print("no report yet: run a %%compile cell or %compile_explain first")
            return
        if args.charts:
            for chart in report_charts(self.last_report):
                display(chart)
        else:
            self._show(self.last_report, args.stages)


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """`%load_ext minicompiler.notebook.magics` (and `%load_ext minicompiler`) registers the magics."""
    ipython.register_magics(CompileMagics)
