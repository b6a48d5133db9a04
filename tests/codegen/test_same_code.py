"""Kernels that are the same code under other names are written and compiled once (codegen/same_code.py)."""

import re

import pytest
import torch

import minicompiler
from minicompiler.codegen.same_code import same_code

F32 = (torch.float32, torch.float32)

KERNEL = """\
# mul = mul(x, 2)  <- model.py:{line}
@triton.jit
def {name}({x}, {y}, BLOCK: tl.constexpr):
    {alias} = {y}  # written in place
    xindex = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tmp0 = tl.load({x} + xindex, mask=xindex < {rows})
    tl.store({alias} + xindex, tmp0 * 2.0, mask=xindex < {rows})
"""


def kernel(name: str, x: str = "in_x", y: str = "out_mul", alias: str = "in_x_1", rows: int = 64,
           line: int = 3) -> str:
    return KERNEL.format(name=name, x=x, y=y, alias=alias, rows=rows, line=line)


def test_names_and_comments_aside_two_kernels_are_one():
    sources = {"kernel_mul": kernel("kernel_mul"),
               "kernel_mul_7": kernel("kernel_mul_7", x="in_add_3", y="out_mul_7", alias="in_add_9", line=12)}
    assert same_code(sources, dict.fromkeys(sources, F32)) == {"kernel_mul": "kernel_mul", "kernel_mul_7": "kernel_mul"}


@pytest.mark.parametrize("other", [
    kernel("kernel_b", rows=65),  # another size
    kernel("kernel_b").replace("2.0", "3.0"),  # another constant
    kernel("kernel_b").replace("BLOCK", "XBLOCK"),  # a constexpr is passed by its name
    kernel("kernel_b").replace("mask=", "other="),  # a keyword argument is not a name the kernel binds
    kernel("kernel_b").replace("tmp0 * 2.0", "2.0 * tmp0"),
    kernel("kernel_b").replace("tl.load(in_x ", "tl.load(in_x_1 "),  # the same names, read in other places
])
def test_any_other_difference_keeps_two_kernels(other):
    sources = {"kernel_a": kernel("kernel_a"), "kernel_b": other}
    assert same_code(sources, dict.fromkeys(sources, F32))["kernel_b"] == "kernel_b"


def test_same_text_other_dtypes_keeps_two_kernels():
    # Triton compiles a variant per pointer dtype; one launcher keeps one compiled kernel per call site's key
    sources = {"kernel_a": kernel("kernel_a"), "kernel_b": kernel("kernel_b")}
    dtypes = {"kernel_a": F32, "kernel_b": (torch.float16, torch.float16)}
    assert same_code(sources, dtypes)["kernel_b"] == "kernel_b"


def repeated_blocks(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for _ in range(3):  # three softmaxes of one shape, each reading a matmul's product
        x = torch.softmax(x, -1) @ w
    return x


@pytest.mark.triton_on_cpu_tensors
def test_repeated_blocks_launch_one_kernel_three_times():
    compiled = minicompiler.compile(repeated_blocks, backend="triton")
    for _ in range(2):  # fresh inputs each call: the shared kernel reads each call site's buffers
        x, w = torch.randn(8, 16), torch.randn(16, 16)
        torch.testing.assert_close(compiled(x, w), repeated_blocks(x, w))
    codegen = next(s for g in compiled.report.graphs for s in g.stages if s.name == "codegen")
    kernels, wrapper = codegen.text.split("# ---- wrapper ----")
    defined = re.findall(r"^def (kernel\w*)\(", kernels, re.MULTILINE)
    launched = re.findall(r"(kernel\w*)\[", wrapper)
    assert len(defined) == 1 and launched == defined * 3
    assert any(n.startswith("2 of 3 kernels are the same code") for n in codegen.notes)


def mixed_dtypes(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.softmax(x, -1) @ w, torch.softmax(y, -1) @ w.double()


@pytest.mark.triton_on_cpu_tensors
def test_softmaxes_of_two_dtypes_are_two_kernels():
    compiled = minicompiler.compile(mixed_dtypes, backend="triton")
    x, y, w = torch.randn(8, 16), torch.randn(8, 16, dtype=torch.float64), torch.randn(16, 16)
    for got, want in zip(compiled(x, y, w), mixed_dtypes(x, y, w), strict=True):
        torch.testing.assert_close(got, want)
    codegen = next(s for g in compiled.report.graphs for s in g.stages if s.name == "codegen")
    kernels, wrapper = codegen.text.split("# ---- wrapper ----")
    defined = re.findall(r"^def (kernel\w*)\(", kernels, re.MULTILINE)
    softmaxes = [name for name in re.findall(r"(kernel\w*)\[", wrapper) if "exp" in name]
    assert len(softmaxes) == 2 and set(softmaxes) <= set(defined)
    assert not any("same code" in n for n in codegen.notes)
