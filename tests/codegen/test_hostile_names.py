"""Hostile names: variables, attributes and modules named like keywords of Python or C++, with
quotes, newlines or non-ASCII letters, or like the names generated code makes itself, compile
through both backends to eager's results; user text in the HTML report is escaped.

(conftest.py sets TRITON_INTERPRET=1: the Triton kernels run on CPU tensors.)
"""

import ast

import pytest
import torch
from torch import nn

import minicompiler
from minicompiler.ir import Graph, TensorMeta
from minicompiler.ir.printer import compile_printed
from minicompiler.notebook.steppers import BytecodeStepper, FusionStepper
from minicompiler.notebook.views import VIEWS, report_to_html, stage_names

# `float` and `double` cannot be nn.Module attributes (Module.float() exists); they are arguments below
ATTRIBUTES = ["class", "def", "int", "auto", "namespace", "x'y", 'q"q', "é", "变量", "a\nb", "torch", "tl", "std",
              "return", "None", "size0", "s0", "const_0", "kernel_mul", "in_x", "sizes", "_",
              # names the generated code makes or imports itself: temporaries, loop indices, block
              # sizes, the wrapper's own arguments and helpers, the Triton and C++ spellings
              "tmp0", "x", "r", "xmask", "BLOCK", "RBLOCK", "triton", "inputs", "call", "ops", "output",
              "channels_last_copy", "out_x", "in_class", "sizes0", "grad", "tangents_1", "self_", "__x__"]
SCRIPT = "</pre><script>alert(1)</script>"


class Hostile(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        for name in ATTRIBUTES:
            # near 1: the product of ~40 of them stays near x, where sin() does not magnify the
            # few ulps another multiplication order gives (from 0.5-1.5 it reached ~100: a flaky test)
            setattr(self, name, nn.Parameter(torch.rand(6) * 0.1 + 0.95))
        inner = nn.Module()
        inner.register_buffer("while", torch.randn(6))
        setattr(self, "import", inner)  # a submodule named like a keyword

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        for name in ATTRIBUTES:
            y = y * getattr(self, name)
        return y.sin() + getattr(getattr(self, "import"), "while")


def test_training_with_hostile_names(backend):
    """The backward graph names its gradients and saved tensors after the forward's nodes."""
    model = Hostile()
    compiled = minicompiler.compile(model, backend=backend)
    for _ in range(2):  # fresh inputs, the cached program the second time
        x = torch.randn(4, 6, requires_grad=True)
        expected, eager_grads = _loss_and_grads(model, x)
        actual, compiled_grads = _loss_and_grads(compiled, x)
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
        assert_same(compiled_grads, eager_grads)
    assert any(graph.kernels for graph in compiled.report.graphs)
    assert_python_stages_parse(compiled.report)


def _loss_and_grads(fn, x):
    loss = (fn(x) * torch.linspace(0.5, 1.5, 6)).sum()
    params = [x, *dict(fn.named_parameters()).values()] if isinstance(fn, nn.Module) else [x]
    return loss.detach(), torch.autograd.grad(loss, params)


def hostile_arguments(é, 变量, int, float, double, auto, size0, s0, sizes):  # noqa: A002 (shadowing is the point)
    namespace = é * 变量 + int
    std = namespace.exp() * float - double
    const_0 = std * auto + size0
    return (const_0 * s0).sum(0), std - sizes


def assert_same(compiled, eager):
    for c, e in zip(torch.utils._pytree.tree_leaves(compiled), torch.utils._pytree.tree_leaves(eager), strict=True):
        # a product of ~40 parameters: compiled code may multiply in another order (a few ulps)
        torch.testing.assert_close(c, e, rtol=1e-5, atol=1e-6)


def assert_python_stages_parse(report):
    """Every Python text the report holds (printed graphs, wrappers, Triton kernels) is valid Python,
    and non-ASCII user text reaches kernel sources (C++ and Triton) only inside comments."""
    for graph in report.graphs:
        for stage in graph.stages:
            if stage.language in ("python", "triton") and stage.text.startswith("def "):
                ast.parse(stage.text)
        for kernel in graph.kernels:
            for line in kernel.code.splitlines():
                code = line.split("//")[0].split("#")[0]
                assert code.isascii(), line


def test_module_attributes_with_hostile_names(backend):
    model, x = Hostile(), torch.randn(4, 6)
    compiled = minicompiler.compile(model, backend=backend)
    assert_same(compiled(x), model(x))
    x = torch.randn(4, 6)  # fresh inputs: the cached program too
    assert_same(compiled(x), model(x))
    assert_python_stages_parse(compiled.report)


@pytest.mark.parametrize("dynamic", [False, True])
def test_arguments_and_locals_with_hostile_names(backend, dynamic):
    compiled = minicompiler.compile(hostile_arguments, backend=backend, dynamic=dynamic)
    for rows in (3, 5):  # dynamic: one program for both sizes, reading s0 from an input named like s0
        args = [torch.randn(rows, 4) for _ in range(9)]
        assert_same(compiled(*args), hostile_arguments(*args))
    assert compiled.report.graphs[0].kernels, "the test means nothing if nothing is generated"
    assert_python_stages_parse(compiled.report)


def test_graph_names_are_ascii_identifiers_not_keywords():
    g = Graph()
    names = ["class", "é", "变量", "x'y", "a\nb", "float", "namespace", "9lives", "", "def"]
    nodes = [g.placeholder(name, TensorMeta((2,), torch.float32)) for name in names]
    total = nodes[0]
    for node in nodes[1:]:
        total = g.call("add", total, node)
    g.output(total)
    printed = [n.name for n in g.nodes[:-1]]
    assert all(name.isascii() and name.isidentifier() for name in printed), printed
    assert len(set(printed)) == len(printed)
    assert [n.name for n in nodes[:4]] == ["class_", "e", "v", "x_y"]
    inputs = [torch.randn(2) for _ in names]
    torch.testing.assert_close(compile_printed(g)(*inputs), sum(inputs))


def script_line(x):
    y = x.sin() * 2  # </pre><script>alert(1)</script>
    print("</pre><script>alert(2)</script>")  # a graph break whose line is shown
    return y.exp() * \
        3


def test_a_source_line_ending_in_a_backslash_does_not_swallow_cpp_code():
    x = torch.randn(5)
    compiled = minicompiler.compile(script_line, backend="cpp")
    assert_same(compiled(x), script_line(x))
    code = "\n".join(k.code for graph in compiled.report.graphs for k in graph.kernels)
    assert not any(line.rstrip().endswith("\\") for line in code.splitlines() if "//" in line)


def test_a_function_named_with_quotes_newlines_and_keywords(backend):
    """A function's name (and qualified name) reaches kernel names, the wrapper and the report."""
    def f(x):
        return (x.cos() * 2).sum(-1)

    for name in ['a"b\'c\nd', "class", "变量"]:
        f.__code__ = f.__code__.replace(co_name=name)
        f.__name__, f.__qualname__ = name, name + ".<locals>." + name
        compiled, x = minicompiler.compile(f, backend=backend), torch.randn(3, 5)
        assert_same(compiled(x), f(x))
        assert compiled.report.graphs[0].kernels
        assert_python_stages_parse(compiled.report)


def test_html_report_escapes_user_text(capsys):
    x = torch.randn(5, requires_grad=True)  # training: the joint/forward/backward views too
    script_line.__code__ = script_line.__code__.replace(co_name=SCRIPT)
    compiled = minicompiler.compile(script_line, backend="cpp")
    assert_same(compiled(x), script_line(x))
    report = compiled.report
    views = [*VIEWS, *stage_names(report)]
    pages = [report_to_html(report, views), report._repr_html_()]
    pages += [BytecodeStepper(report).render(i) for i in range(len(report.trace))] if report.trace else []
    pages += [FusionStepper(report).render(0)]
    for page in pages:
        assert "<script" not in page.lower()
    assert "&lt;script&gt;" in pages[0]  # the line is shown, escaped
