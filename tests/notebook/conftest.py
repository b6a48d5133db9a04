"""A hand-built CompileReport with realistic content, so every view can be tested on its own."""

from __future__ import annotations

import pytest

from minicompiler.report import (
    CompileReport,
    FusionInfo,
    GraphBreakInfo,
    GraphReport,
    InstructionInfo,
    KernelInfo,
    StageRecord,
    TraceStep,
)

SOURCE = '''def model(x, w):
    y = torch.cos(x)
    z = y * w + 1
    print("z:", z.shape)
    return torch.softmax(z, -1)
'''

CAPTURED = '''def forward(x: "float32[4, 8]", w: "float32[8]"):
    cos = ops.cos(x)                 # float32[4, 8]  cell.py:11  y = torch.cos(x)
    mul = ops.mul(cos, w)            # float32[4, 8]  cell.py:12  z = y * w + 1
    add = ops.add(mul, 1)            # float32[4, 8]  cell.py:12  z = y * w + 1
    softmax = ops.softmax(add, -1)   # float32[4, 8]  cell.py:14  return torch.softmax(z, -1)
    return softmax'''

DECOMPOSED = '''def forward(x: "float32[4, 8]", w: "float32[8]"):
    cos = ops.cos(x)                       # float32[4, 8]  cell.py:11  y = torch.cos(x)
    mul = ops.mul(cos, w)                  # float32[4, 8]  cell.py:12  z = y * w + 1
    add = ops.add(mul, 1)                  # float32[4, 8]  cell.py:12  z = y * w + 1
    mul_1 = ops.mul(add, 1)                # float32[4, 8]  cell.py:14  return torch.softmax(z, -1)
    amax = ops.amax(mul_1, (1,), True)     # float32[4, 1]  cell.py:14  return torch.softmax(z, -1)
    sub = ops.sub(mul_1, amax)             # float32[4, 8]  cell.py:14  return torch.softmax(z, -1)
    exp = ops.exp(sub)                     # float32[4, 8]  cell.py:14  return torch.softmax(z, -1)
    sum = ops.sum(exp, (1,), True)         # float32[4, 1]  cell.py:14  return torch.softmax(z, -1)
    div = ops.div(exp, sum)                # float32[4, 8]  cell.py:14  return torch.softmax(z, -1)
    return div'''

SIMPLIFIED = '''def forward(x: "float32[4, 8]", w: "float32[8]"):
    cos = ops.cos(x)                    # float32[4, 8]  cell.py:11  y = torch.cos(x)
    mul = ops.mul(cos, w)               # float32[4, 8]  cell.py:12  z = y * w + 1
    add = ops.add(mul, 1)               # float32[4, 8]  cell.py:12  z = y * w + 1
    amax = ops.amax(add, (1,), True)    # float32[4, 1]  cell.py:14  return torch.softmax(z, -1)
    sub = ops.sub(add, amax)            # float32[4, 8]  cell.py:14  return torch.softmax(z, -1)
    exp = ops.exp(sub)                  # float32[4, 8]  cell.py:14  return torch.softmax(z, -1)
    sum = ops.sum(exp, (1,), True)      # float32[4, 1]  cell.py:14  return torch.softmax(z, -1)
    div = ops.div(exp, sum)             # float32[4, 8]  cell.py:14  return torch.softmax(z, -1)
    return div'''

KERNEL_0 = '''// cos = cos(x)  <- cell.py:11
// mul = mul(cos, w)  <- cell.py:12
// add = add(mul, 1)  <- cell.py:12
extern "C" void kernel_cos_mul_add(const float* __restrict__ in_x, const float* __restrict__ in_w,
                                   float* __restrict__ out_add) {
    for (int64_t i = 0; i < 32; ++i) {
        out_add[i] = std::cos(in_x[i]) * in_w[i % 8] + 1.0f;
    }
}'''

KERNEL_1 = '''// amax = amax(add, (1,), True)  <- cell.py:14
// div = div(exp, sum)  <- cell.py:14
extern "C" void kernel_amax_sub_exp_sum_div(const float* __restrict__ in_add, float* __restrict__ out_div) {
    for (int64_t x = 0; x < 4; ++x) {
        float acc0 = -INFINITY;
        for (int64_t r = 0; r < 8; ++r) acc0 = std::max(acc0, in_add[x * 8 + r]);
        float acc1 = 0.0f;
        for (int64_t r = 0; r < 8; ++r) acc1 += std::exp(in_add[x * 8 + r] - acc0);
        for (int64_t r = 0; r < 8; ++r) out_div[x * 8 + r] = std::exp(in_add[x * 8 + r] - acc0) / acc1;
    }
}'''

NODE_LINES = {"cos": 11, "mul": 12, "add": 12, "mul_1": 14, "amax": 14, "sub": 14, "exp": 14, "sum": 14,
              "div": 14, "softmax": 14}

BYTECODE = [
    (0, "RESUME", "", 10, "constant"), (2, "LOAD_GLOBAL", "NULL + torch", 11, "constant"),
    (14, "LOAD_ATTR", "cos", 11, "constant"), (24, "LOAD_FAST", "x", 11, "captured"),
    (30, "CALL", "1", 11, "captured"), (40, "STORE_FAST", "y", 11, "captured"),
    (42, "LOAD_FAST", "y", 12, "captured"), (44, "LOAD_FAST", "w", 12, "captured"),
    (46, "BINARY_OP", "*", 12, "captured"), (50, "LOAD_CONST", "1", 12, "constant"),
    (52, "BINARY_OP", "+", 12, "captured"), (56, "STORE_FAST", "z", 12, "captured"),
    (58, "LOAD_GLOBAL", "NULL + print", 13, "constant"), (70, "LOAD_CONST", "'z:'", 13, "constant"),
    (72, "LOAD_FAST", "z", 13, "captured"), (74, "LOAD_ATTR", "shape", 13, "constant"),
    (84, "CALL", "2", 13, "break"), (94, "RETURN_VALUE", "", 14, "not reached"),
]


X = "TensorVariable(x: float32[4, 8])"
W = "TensorVariable(w: float32[8])"
GUARDS = ["x: float32[4, 8] contiguous cpu requires_grad=False",
          "w: float32[8] contiguous cpu requires_grad=False"]


def _trace() -> list[TraceStep]:
    """The symbolic interpreter's state after each of the first instructions (stack, locals, graph)."""
    args = {"x": X, "w": W}
    cos = "TensorVariable(cos: float32[4, 8])"
    states = [  # (stack, locals, graph so far) after each instruction of BYTECODE
        ([], args, []),
        (["TorchModule(torch)"], args, []),
        (["TorchFunction(torch.cos)"], args, []),
        (["TorchFunction(torch.cos)", X], args, []),
        ([cos], args, ["cos = ops.cos(x)"]),
        ([], {**args, "y": cos}, ["cos = ops.cos(x)"]),
        ([cos], {**args, "y": cos}, ["cos = ops.cos(x)"]),
        ([cos, W], {**args, "y": cos}, ["cos = ops.cos(x)"]),
        (["TensorVariable(mul: float32[4, 8])"], {**args, "y": cos},
         ["cos = ops.cos(x)", "mul = ops.mul(cos, w)"]),
    ]
    return [
        TraceStep(offset, opname, argrepr, lineno, "model", stack, local_vars, GUARDS[: 1 + (i > 6)], graph,
                  status)
        for i, ((offset, opname, argrepr, lineno, status), (stack, local_vars, graph))
        in enumerate(zip(BYTECODE, states, strict=False))
    ]


def make_report() -> CompileReport:
    stages = [
        StageRecord("capture", 0.012, CAPTURED, node_lines=dict(NODE_LINES)),
        StageRecord("decompose", 0.004, DECOMPOSED, node_lines=dict(NODE_LINES)),
        StageRecord("simplify", 0.003, SIMPLIFIED, notes=["mul_1 = add * 1 -> add  (x*1 -> x)"],
                    node_lines=dict(NODE_LINES)),
        StageRecord("fuse", 0.001, "steps:\n  kernel_cos_mul_add\n  kernel_amax_sub_exp_sum_div", "text",
                    node_lines=dict(NODE_LINES)),
        StageRecord("codegen", 0.9, f"{KERNEL_0}\n\n{KERNEL_1}", "cpp"),
    ]
    kernels = [
        KernelInfo("kernel_cos_mul_add", "pointwise", ["cos", "mul", "add"],
                   ["cell.py:11  y = torch.cos(x)", "cell.py:12  z = y * w + 1"], KERNEL_0, "cpp",
                   bytes_moved=288, bytes_minimum=288),
        KernelInfo("kernel_amax_sub_exp_sum_div", "reduction", ["amax", "sub", "exp", "sum", "div"],
                   ["cell.py:14  return torch.softmax(z, -1)"], KERNEL_1, "cpp",
                   bytes_moved=512, bytes_minimum=256),
    ]
    fusion = [
        FusionInfo("cos", "mul", True, "same iteration space [4, 8]"),
        FusionInfo("mul", "add", True, "same iteration space [4, 8]"),
        FusionInfo("add", "amax", False,
                   "amax reduces dims (1,) but add is also read by sub in another loop"),
        FusionInfo("amax", "sub", True, "row value of a reduction over dims (1,)"),
        FusionInfo("sub", "exp", True, "same iteration space [4, 8]"),
        FusionInfo("exp", "sum", True, "reduction over dims (1,) of its producers' domain [4, 8]"),
        FusionInfo("sum", "div", True, "row value of a reduction over dims (1,)"),
    ]
    graph = GraphReport(
        "cpp",
        guards=[*GUARDS, "id(G['torch']) == 1403"],
        stages=stages, kernels=kernels, fusion=fusion,
    )
    return CompileReport(
        function="model", filename="cell.py", firstlineno=10, source=SOURCE,
        bytecode=[InstructionInfo(o, n, a, ln, s, "model") for o, n, a, ln, s in BYTECODE],
        trace=_trace(), graphs=[graph],
        graph_breaks=[GraphBreakInfo("print() has side effects outside the graph", "cell.py", 13,
                                     'print("z:", z.shape)', "CALL", "move the print out of the function")],
        compile_seconds=0.92,
        run_times={"eager": 4.1e-5, "compiled": 1.2e-5},
        run_samples={"eager": [4.0e-5, 4.1e-5, 4.3e-5], "compiled": [1.1e-5, 1.2e-5, 1.4e-5]},
    )


def make_training_report() -> CompileReport:
    report = make_report()
    graph = report.graphs[0]
    graph.autograd = [
        StageRecord("joint", 0.002, 'def joint(x: "float32[4, 8]", tangent: "float32[4, 8]"):\n'
                    '    cos = ops.cos(x)\n    sin = ops.sin(x)\n    neg = ops.neg(sin)\n'
                    '    mul = ops.mul(tangent, neg)\n    return (cos, mul)'),
        StageRecord("forward", 0.001, 'def forward(x: "float32[4, 8]"):\n    cos = ops.cos(x)\n'
                    '    return (cos, x)'),
        StageRecord("backward", 0.001, 'def backward(x: "float32[4, 8]", tangent: "float32[4, 8]"):\n'
                    '    sin = ops.sin(x)\n    neg = ops.neg(sin)\n    mul = ops.mul(tangent, neg)\n'
                    '    return mul'),
    ]
    graph.saved_tensors = ["x: float32[4, 8]"]
    graph.saved_bytes = {"eager": 256, "compiled": 128}
    return report


@pytest.fixture
def report() -> CompileReport:
    return make_report()


@pytest.fixture
def training_report() -> CompileReport:
    return make_training_report()
