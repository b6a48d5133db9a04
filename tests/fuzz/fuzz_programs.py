"""Random tensor programs for differential fuzzing: minicompiler vs eager PyTorch.

A program is Python source (so a failure prints as code you can paste into a regression test):

    def program(x0, x1):
        v2 = torch.sin(x0)
        v3 = torch.sum(v2, 1, keepdim=True)
        v4 = v2 * v3
        return v4

Inputs come in awkward layouts (transposed, sliced with an offset, expanded, sizes 0 and 1) and
dtypes; ops are pointwise, reductions, views and indexing, chained into a DAG: each step reads
any earlier value whose shape broadcasts with it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

UNARY = ["torch.sin({})", "torch.tanh({})", "torch.relu({})", "torch.abs({})", "-{}", "torch.sigmoid({})",
         "torch.exp(torch.clamp({}, max=3))", "({} * 0.5)", "torch.square({})", "torch.cos({})",
         "torch.atan({})", "torch.asinh({})", "torch.round({} * 4)", "torch.signbit({}).float()"]
BINARY = ["{} + {}", "{} * {}", "{} - {}", "torch.maximum({}, {})", "torch.where({0} > {1}, {0}, {1})",
          "torch.atan2({}, {})", "torch.copysign({}, {})"]
INT_UNARY = ["torch.abs({})", "-{}", "({} * 3)", "({} + 1)"]
INT_BINARY = ["{} + {}", "{} * {}", "torch.maximum({}, {})", "torch.where({0} > {1}, {0}, {1})"]
REDUCTIONS = ["torch.sum({}, {}, keepdim={})", "torch.amax({}, {}, keepdim={})", "torch.mean({}, {}, keepdim={})"]


LAYOUTS = ["contiguous", "transposed", "offset", "expanded"]


@dataclass(frozen=True)
class InputSpec:
    """How to make one input: its shape, dtype and memory layout (values come from torch's seed)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    layout: str = "contiguous"  # one of LAYOUTS

    def make(self) -> torch.Tensor:
        shape = list(self.shape)
        if self.layout == "transposed" and len(shape) >= 2:
            return self._values(shape[:-2] + [shape[-1], shape[-2]]).transpose(-1, -2)
        if self.layout == "offset" and shape:
            return self._values([shape[0] + 2] + shape[1:])[1:-1]
        if self.layout == "expanded" and shape:
            return self._values([1] + shape[1:]).expand(shape)
        return self._values(shape)

    def _values(self, shape: list[int]) -> torch.Tensor:
        if self.dtype.is_floating_point:
            return torch.randn(shape, dtype=torch.float64).to(self.dtype)
        return torch.randint(-5, 6, shape, dtype=self.dtype)


@dataclass
class Program:
    """A program's source and its inputs' recipe; `seed` also seeds the inputs' values, so a
    program written down as (seed, source, specs) replays without the generator that made it."""

    seed: int
    source: str
    specs: list[InputSpec]

    @property
    def inputs(self) -> list[torch.Tensor]:
        torch.manual_seed(self.seed)
        return [spec.make() for spec in self.specs]

    @property
    def differentiable(self) -> bool:
        return self.specs[0].dtype in (torch.float32, torch.float64)

    def function(self):
        scope: dict = {"torch": torch}
        exec(self.source, scope)
        return scope["program"]

    def __str__(self) -> str:
        """The program as an entry for test_regressions.py."""
        return f"Program({self.seed}, {self.source!r}, {self.specs!r})"


def generate(seed: int, steps: int = 6) -> Program:
    rng = random.Random(seed)
    dtype = rng.choice([torch.float32, torch.float32, torch.float64, torch.float16, torch.bfloat16,
                        torch.int64, torch.int32])
    floating = dtype.is_floating_point
    shape = [rng.choice([0, 1, 1, 2, 3, 5, 7]) for _ in range(rng.randint(0, 3))]
    specs, names, shapes, lines = [], [], [], []
    for i in range(rng.randint(1, 3)):
        own = _broadcast_partner(rng, shape) if i else list(shape)
        specs.append(InputSpec(tuple(own), dtype, _layout(rng, own)))
        names.append(f"x{i}")
        shapes.append(own)
    for _step in range(steps):
        name = f"v{len(names)}"
        choice = rng.random()
        src = rng.randrange(len(names))
        a, a_shape = names[src], shapes[src]
        if choice < 0.35:
            expr = rng.choice(UNARY if floating else INT_UNARY).format(a)
            new_shape = a_shape
        elif choice < 0.7:
            partners = [j for j, s in enumerate(shapes) if _broadcasts(s, a_shape)]
            j = rng.choice(partners)
            expr = rng.choice(BINARY if floating else INT_BINARY).format(a, names[j])
            new_shape = list(torch.broadcast_shapes(tuple(a_shape), tuple(shapes[j])))
        elif choice < 0.85 and a_shape:
            dim = rng.randrange(len(a_shape))
            keep = rng.random() < 0.6
            ops = REDUCTIONS if floating else REDUCTIONS[:1]
            if a_shape[dim] == 0:
                ops = ["torch.sum({}, {}, keepdim={})"]
            expr = rng.choice(ops).format(a, dim, keep)
            new_shape = [1 if d == dim else s for d, s in enumerate(a_shape)] if keep else \
                [s for d, s in enumerate(a_shape) if d != dim]
        elif a_shape and len(a_shape) >= 2 and rng.random() < 0.5:
            if rng.random() < 0.6:
                expr, new_shape = f"{a}.transpose(0, 1)", [a_shape[1], a_shape[0], *a_shape[2:]]
            else:  # a triangle of the last two dims (its kernel compares element coordinates)
                expr, new_shape = f"torch.{rng.choice(['tril', 'triu'])}({a}, {rng.randint(-1, 1)})", a_shape
        elif a_shape:
            expr, new_shape = _moving(rng, a, a_shape, floating)
        else:
            expr, new_shape = f"{a}.unsqueeze(0)", [1]
        lines.append(f"    {name} = {expr}")
        names.append(name)
        shapes.append(new_shape)
    outputs = names[-1] if rng.random() < 0.7 else f"{names[-1]}, {names[len(specs)]}"
    source = f"def program({', '.join(names[:len(specs)])}):\n" + "\n".join(lines) + f"\n    return {outputs}\n"
    return Program(seed, source, specs)


def _moving(rng: random.Random, a: str, shape: list[int], floating: bool) -> tuple[str, list[int]]:
    """A view or a gather along one dim (narrow, flip, roll, cat, pad, repeat), or a scan or an
    argmax along it: an op whose element reads other elements than its own."""
    dim = rng.randrange(len(shape))
    n = shape[dim]
    grown = [2 * s if d == dim else s for d, s in enumerate(shape)]
    choices = [
        (f"{a}.narrow({dim}, 0, {n // 2})", [n // 2 if d == dim else s for d, s in enumerate(shape)]),
        (f"{a}.flip({dim})", shape),
        (f"torch.roll({a}, {rng.randint(-3, 3)}, {dim})", shape),
        (f"torch.cat([{a}, {a}.flip({dim})], {dim})", grown),
        (f"{a}.repeat({', '.join('2' if d == dim else '1' for d in range(len(shape)))})", grown),
        (f"torch.cumsum({a}, {dim})", shape),
    ]
    if dim == len(shape) - 1:  # a constant pad of the last dim: (1 before, 2 after)
        choices.append((f"torch.nn.functional.pad({a}, (1, 2))", [*shape[:-1], n + 3]))
    if n > 0 and floating:
        choices.append((f"{a}.argmax({dim}, keepdim=True).to({a}.dtype)",
                        [1 if d == dim else s for d, s in enumerate(shape)]))
    return rng.choice(choices)


def _layout(rng: random.Random, shape: list[int]) -> str:
    layout = rng.choice(LAYOUTS) if shape else "contiguous"
    return "contiguous" if layout == "transposed" and len(shape) < 2 else layout


def _broadcast_partner(rng: random.Random, shape: list[int]) -> list[int]:
    """`shape`, or a shape that broadcasts against it: leading dims dropped, or a dim of size 1."""
    choice = rng.random()
    if choice < 0.3 and shape:
        return shape[rng.randint(1, len(shape)):]
    if choice < 0.6 and shape:
        dim = rng.randrange(len(shape))
        return [1 if d == dim else s for d, s in enumerate(shape)]
    return list(shape)


def _broadcasts(a: list[int], b: list[int]) -> bool:
    try:
        torch.broadcast_shapes(tuple(a), tuple(b))
        return True
    except RuntimeError:
        return False
