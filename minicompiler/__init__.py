"""minicompiler: a small, readable deep-learning compiler for PyTorch programs.

    f = minicompiler.compile(fn_or_module)   # like torch.compile
    f(*args)                                  # captured, compiled, guarded, cached
    f.report                                  # every stage, as text, HTML or JSON
"""

from minicompiler.api import CompiledFunction, GraphBreakError, compile
from minicompiler.report import CompileReport


def load_ipython_extension(ipython) -> None:  # noqa: ANN001 - IPython's own type
    """`%load_ext minicompiler`: registers %%compile, %compile_explain, %compile_bench, %compile_report."""
    from minicompiler.notebook.magics import load_ipython_extension as load

    load(ipython)


__all__ = ["CompileReport", "CompiledFunction", "GraphBreakError", "compile", "load_ipython_extension"]
