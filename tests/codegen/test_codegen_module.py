"""CompiledModule as a whole: wrapper, externs, aliases, outputs, provenance and errors."""

import pytest
import torch

from minicompiler.codegen import CodegenError, generate
from minicompiler.fuse import fuse
from minicompiler.ir import Graph, SourceLoc, TensorMeta


def build(fn, example):
    g = Graph()
    g.output(fn(g, g.placeholder("x", TensorMeta.of(example))))
    return g


def test_matmul_bias_relu_is_an_extern_and_one_kernel(backend, check):
    x, w, b = torch.randn(7, 9), torch.randn(9, 4), torch.randn(4)
    module = check(lambda g, x, w, b: g.call("maximum", g.call("add", g.call("matmul", x, w), b), 0.0),
                   x, w, b, backend=backend)
    kinds = [type(step).__name__ for step in module.schedule.steps]
    assert kinds == ["ExternCall", "Kernel"]
    assert "ops.matmul(x0, x1)" in module.wrapper_source


def test_views_are_aliases_read_through_strides(backend, check):
    a, b = torch.randn(3, 8)[:, 1:7:2], torch.randn(3, 1).expand(3, 4)

    def fn(g, a, b):
        product = g.call("mul", a, g.call("slice", b, 1, 0, 3, 1))
        flipped = g.call("permute", product, (1, 0))
        return g.call("exp", flipped), g.call("reshape", flipped, (9,)), g.call("expand", a, (2, 3, 3))

    module = check(fn, a, b, backend=backend)
    steps = {step.node.op: type(step).__name__ for step in module.schedule.steps if hasattr(step, "node")}
    # the permuted product is not contiguous, so flattening it must copy
    assert steps == {"slice": "Alias", "permute": "Alias", "reshape": "ExternCall", "expand": "Alias"}
    product = next(n for n in module.schedule.graph.nodes if n.op == "mul")
    assert module.schedule.buffers[product].reasons == ("viewed by permute",)


def test_outputs_may_be_inputs_constants_and_nested(backend, check):
    x = torch.randn(5)
    module = check(lambda g, x: {"same": x, "pair": [g.call("cos", x), 2.5], "none": None},
                   x, backend=backend)
    out = module([x])
    assert out["same"] is x and out["pair"][1] == 2.5 and out["none"] is None


def test_extern_torch_call_runs_any_function(backend, check):
    x = torch.randn(6, 4)
    module = check(lambda g, x: g.call("cos", g.call("torch_call", torch.nn.functional.softplus, x, beta=2)),
                   x, backend=backend)
    assert "const_0(x0, beta=2).contiguous()" in module.wrapper_source


def test_empty_tensors(backend, check):
    x = torch.randn(0, 5)
    module = check(lambda g, x: (g.call("exp", x), g.call("sum", x, (0,), False)), x, backend=backend)
    assert module([x])[1].tolist() == [0.0] * 5


def test_generated_code_names_its_user_source_lines(backend):
    src = SourceLoc("/home/me/model.py", 4, "b = torch.cos(a)", function="f")
    g = Graph()
    # on the default device: the GPU under tests.triton_on_gpu, where Triton has no CPU
    x = g.placeholder("x", TensorMeta((16,), torch.float32, torch.get_default_device()))
    with g.provenance(src):
        cos = g.call("cos", x)
    g.output(g.call("cos", cos, source=SourceLoc("/home/me/model.py", 5, "c = torch.cos(b)")))
    module = generate(fuse(g), backend)
    [(name, text)] = module.kernel_sources.items()
    assert name == "kernel_cos_cos"
    assert "cos = cos(x)  <- model.py:4  b = torch.cos(a)" in text
    assert text in module.source and module.wrapper_source in module.source
    lines = text.splitlines()
    assert {kernel for kernel, _ in module.line_origins} == {name}
    from_line_4 = [lines[n - 1].strip() for (_, n), s in module.line_origins.items() if s == [src]]
    assert from_line_4[0].endswith("b = torch.cos(a)")  # the provenance comment
    assert any("cos(" in line and not line.startswith(("#", "//")) for line in from_line_4)  # the code


def test_cpp_kernels_are_omp_loops_with_baked_sizes():
    g = build(lambda g, x: g.call("exp", g.call("exp", x)), torch.randn(1 << 20))
    text = generate(fuse(g), "cpp").kernel_sources["kernel_exp_exp"]
    assert "#pragma omp parallel for simd" in text and "x < 1048576" in text
    assert "in_x[x]" in text  # contiguous: the index is the loop counter, no div/mod


def test_unsupported_dtype_is_a_clear_error(backend):
    g = build(lambda g, x: g.call("mul", x, x), torch.randn(3, dtype=torch.complex64))
    with pytest.raises(CodegenError, match=f"{backend} backend does not support torch.complex64"):
        generate(fuse(g), backend)


def test_unknown_backend_and_wrong_device():
    g = build(lambda g, x: g.call("cos", x), torch.randn(3))
    with pytest.raises(CodegenError, match="unknown backend"):
        generate(fuse(g), "cuda")
    g = Graph()
    x = g.placeholder("x", TensorMeta((3,), torch.float32, torch.device("cuda")))
    g.output(g.call("cos", x))
    with pytest.raises(CodegenError, match=r"cpp backend runs on CPU tensors.*\(placeholder x is on cuda\)"):
        generate(fuse(g), "cpp")


def test_triton_without_gpu_or_interpreter_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    g = build(lambda g, x: g.call("cos", x), torch.randn(3))
    with pytest.raises(CodegenError, match="needs a CUDA GPU, or TRITON_INTERPRET=1"):
        generate(fuse(g), "triton")


def test_a_missing_compiler_is_a_codegen_error(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    monkeypatch.setenv("MINICOMPILER_CACHE_DIR", str(tmp_path))
    g = build(lambda g, x: g.call("sin", x), torch.randn(3))
    with pytest.raises(CodegenError, match="could not build its kernels: .*needs a C\\+\\+ compiler"):
        generate(fuse(g), "cpp")
