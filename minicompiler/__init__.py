"""minicompiler: a small, readable deep-learning compiler for PyTorch programs.

    f = minicompiler.compile(fn_or_module)   # like torch.compile
    f(*args)                                  # captured, compiled, guarded, cached
    f.report                                  # every stage, as text, HTML or JSON

    minicompiler.explain(fn)(*args)           # graphs, graph breaks, ops and guards (like torch._dynamo.explain)
    minicompiler.set_logs(graph_breaks=True)  # or MINICOMPILER_LOGS=graph_breaks,recompiles,guards,graph,output_code
    with minicompiler.fail_on_recompile(): ... # compiling raises RecompileError (torch.compiler.set_stance)
    torch.compile(fn, backend=minicompiler.backend)   # TorchDynamo's capture, minicompiler's compiler
    torch.compile(fn, backend="minicompiler")         # the same, by name (after pip install)
"""

from minicompiler.api import CompiledFunction, GraphBreakError, compile
from minicompiler.compiled_module import CompiledModule
from minicompiler.dynamo_backend import backend, list_backends
from minicompiler.explain import ExplainOutput, explain
from minicompiler.logs import set_logs
from minicompiler.recompiles import RecompileError, fail_on_recompile
from minicompiler.report import CompileReport


def load_ipython_extension(ipython) -> None:  # noqa: ANN001 - IPython's own type
    """`%load_ext minicompiler`: registers %%compile, %compile_explain, %compile_bench, %compile_report."""
    from minicompiler.notebook.magics import load_ipython_extension as load

    load(ipython)


__all__ = [
    "CompileReport", "CompiledFunction", "CompiledModule", "ExplainOutput", "GraphBreakError", "RecompileError",
    "backend", "compile", "explain", "fail_on_recompile", "list_backends", "load_ipython_extension", "set_logs",
]
