"""Every primitive's VJP rule, run by the reference interpreter, against torch.autograd on the eager op."""

from collections.abc import Callable
from typing import Any

import pytest
import torch

from minicompiler.autograd import NO_GRADIENT, NOT_DIFFERENTIABLE, VJP_RULES, NotDifferentiable, differentiate
from minicompiler.ir import (
    OPS,
    Graph,
    Node,
    SourceLoc,
    TensorMeta,
    flatten,
    is_primitive,
    map_structure,
    run_graph,
    verify,
)

PRIMITIVES = sorted(op for op in OPS if is_primitive(op))


def randn(*shape: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(shape, dtype=dtype)


def positive(*shape: int) -> torch.Tensor:
    return torch.rand(shape, dtype=torch.float64) + 0.5


def ties(*shape: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two tensors equal in about half their elements (max/min must split the gradient there)."""
    a = randn(*shape)
    return a, torch.where(torch.rand(shape) < 0.5, a, randn(*shape))


def small_ints(*shape: int) -> torch.Tensor:
    """Floats with many repeated values: reductions like amax then have ties."""
    return torch.randint(0, 3, shape).double()


def with_zeros(t: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.rand(t.shape) < 0.3, torch.zeros_like(t), t)


UNARY = ["neg", "abs", "exp", "sin", "cos", "tanh", "erf", "expm1", "clone", "floor", "ceil", "trunc", "sign",
         "atan", "asinh", "erfc", "round", "signbit", "sigmoid"]
INSIDE_UNIT = ["asin", "acos", "atanh"]  # defined (with a finite derivative) inside (-1, 1)
POSITIVE_UNARY = ["log", "sqrt", "rsqrt", "log1p", "reciprocal"]
COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]
Sample = Callable[[], tuple]
BROADCAST_PAIRS: list[Sample] = [
    lambda: (randn(3, 1, 4), randn(5, 4)),
    lambda: (randn(3, 4), 2.5),
    lambda: (1.5, randn(3, 4)),
    lambda: (randn(2, 3), randn(3, dtype=torch.float32)),  # type promotion: the f32 grad is cast back
    lambda: (randn(), randn(2, 3)),  # a 0-d tensor
]
EXTREMUM_PAIRS: list[Sample] = [
    lambda: (randn(3, 1, 4), randn(5, 4)),
    lambda: ties(3, 4),
    lambda: (with_zeros(randn(3, 4)), 0.0),  # a scalar bound (torch.clamp), hit exactly
    lambda: (0.3, randn(3, 4)),
]
ARGMAX_LIKE: list[Sample] = [
    lambda: (small_ints(4, 5), (1,), False),
    lambda: (small_ints(4, 5, 2), (0, 2), True),
    lambda: (randn(3, 4), (0, 1)),
]

# op -> sample arguments (fresh random tensors on every call; tensors may sit inside lists).
SAMPLES: dict[str, list[Sample]] = {
    **{op: [lambda: (randn(3, 4),), lambda: (randn(),)] for op in UNARY},
    **{op: [lambda: (positive(3, 4),)] for op in POSITIVE_UNARY},
    "tan": [lambda: (torch.rand(3, 4, dtype=torch.float64) * 2 - 1,)],
    **{op: [lambda: (torch.rand(3, 4, dtype=torch.float64) * 1.8 - 0.9,)] for op in INSIDE_UNIT},
    "acosh": [lambda: (positive(3, 4) + 1,)],
    "atan2": [lambda: (randn(3, 1, 4), randn(5, 4)), lambda: (randn(3, 4), randn(dtype=torch.float64))],
    "fmod": [lambda: (randn(3, 1, 4), positive(5, 4)), lambda: (randn(3, 4), -2.5)],
    # special functions (autograd/special_rules.py)
    **{op: [lambda: (randn(3, 4) * 3,), lambda: (randn(),)] for op in ["lgamma", "digamma", "trigamma", "erfcx",
                                                                        "log_ndtr", "i0", "i0e", "i1", "i1e"]},
    "erfinv": [lambda: (torch.rand(3, 4, dtype=torch.float64) * 1.8 - 0.9,)],
    "ndtri": [lambda: (torch.rand(3, 4, dtype=torch.float64) * 0.98 + 0.01,)],
    "zeta": [lambda: (3.0, positive(3, 4)), lambda: (2.0, randn(3, 4))],  # (torch: no derivative in x)
    "nextafter": [lambda: (randn(3, 4), randn(3, 4)), lambda: (randn(3, 1), randn(4))],
    "logical_not": [lambda: (with_zeros(randn(3, 4)),)],
    **{op: BROADCAST_PAIRS for op in ["add", "sub", "mul"]},
    "div": [lambda: (randn(3, 1, 4), positive(5, 4)), lambda: (randn(3, 4), 2.5), lambda: (1.5, positive(4))],
    # (torch has no derivative for remainder(scalar, tensor) to compare with)
    "remainder": [lambda: (randn(3, 1, 4), positive(5, 4)), lambda: (randn(3, 4), 2.5)],
    "pow": [
        lambda: (positive(3, 1), randn(4)),
        lambda: (randn(3, 4), 3),
        lambda: (positive(3, 4), 0.5),
        lambda: (randn(3, 4), 0),
        lambda: (2.0, randn(3, 4)),
        lambda: (with_zeros(positive(3, 4)), positive(3, 4) + 1),  # 0 ** b: torch's conventions
    ],
    **{op: EXTREMUM_PAIRS for op in ["maximum", "minimum"]},
    **{op: [lambda: (randn(3, 4), randn(3, 4)), lambda: (randn(3, 4), 0.0)] for op in COMPARISONS},
    **{op: [lambda: (with_zeros(randn(3, 4)), with_zeros(randn(4)))] for op in ["logical_and", "logical_or"]},
    "where": [
        lambda: (torch.rand(3, 4) < 0.5, randn(3, 4), randn(4)),
        lambda: (torch.rand(3, 4) < 0.5, randn(3, 4), 0.0),
    ],
    "convert": [
        lambda: (randn(3, 4), torch.float32),
        lambda: (randn(3, 4, dtype=torch.float32), torch.float64),
        lambda: (randn(3, 4), torch.int32),
    ],
    "full": [lambda: ((2, 3), 1.5, torch.float64)],
    "iota": [lambda: ((1, 4), 1, torch.float64), lambda: ((3, 1, 1), 0, torch.int64)],
    "sum": [
        lambda: (randn(3, 4, 5), (0, 2), False),
        lambda: (randn(3, 4, 5), (1,), True),
        lambda: (randn(3, 4), ()),  # () reduces every dim
    ],
    **{op: ARGMAX_LIKE for op in ["amax", "amin", "argmax", "argmin"]},
    **{op: [lambda: (small_ints(4, 5), 1), lambda: (randn(3, 4, 2), 0)] for op in ["cumsum", "cummax_index",
                                                                               "cummin_index"]},
    # rows with no zero, one, several (small_ints: 0, 1, 2)
    "cumprod": [lambda: (small_ints(5, 6), 1), lambda: (with_zeros(randn(4, 3, 2)), 0), lambda: (randn(4), 0)],
    "prod": [  # rows with no zero, one, several (the gradient at a zero is the product of the others)
        lambda: (with_zeros(randn(3, 4, 5)), (0, 2), False),
        lambda: (with_zeros(randn(6, 3)), (0,), True),
        lambda: (randn(3, 4), ()),
        lambda: (randn(), ()),
    ],
    "reshape": [lambda: (randn(3, 4), (2, 6)), lambda: (randn(3, 4), (12,))],
    "permute": [lambda: (randn(2, 3, 4), (2, 0, 1)), lambda: (randn(2, 3), (-1, 0))],
    "expand": [lambda: (randn(3, 1), (2, 3, 5)), lambda: (randn(), (4,))],
    "slice": [
        lambda: (randn(7, 5), 0, 1, 6),
        lambda: (randn(4, 9), 1, 1, None, 3),
        lambda: (randn(4, 9), 1, -4, None, 2),
        lambda: (randn(4, 9), 1, 0, 9, 4),
        lambda: (randn(4, 5), 1, 10, 20),  # empty
    ],
    "matmul": [
        lambda: (randn(3, 4), randn(4, 5)),
        lambda: (randn(2, 3, 4), randn(4, 5)),
        lambda: (randn(2, 1, 3, 4), randn(5, 4, 2)),  # broadcast batch dims
        lambda: (randn(4), randn(2, 4, 5)),
        lambda: (randn(2, 3, 4), randn(4)),
        lambda: (randn(4), randn(4)),
    ],
    "addmm": [lambda: (randn(5), randn(3, 4), randn(4, 5)), lambda: (randn(3, 5), randn(3, 4), randn(4, 5))],
    "bmm": [lambda: (randn(2, 3, 4), randn(2, 4, 5))],
    "cat": [lambda: ([randn(2, 3), randn(4, 3)], 0), lambda: ([randn(2, 3), randn(2, 1), randn(2, 2)], -1)],
    "detach": [lambda: (randn(3, 4),)],
    # repeated indices: an element read twice gets both gradients
    "load_at": [lambda: (randn(4, 3), (torch.tensor([[0], [3], [0]]), torch.tensor([[2, 0]]))),
                lambda: (randn(5), (torch.tensor([4, 4, 1]),)), lambda: (randn(3, 2), (2, torch.tensor([1, 0, 1])))],
    "store_at": [lambda: (randn(5), torch.tensor([4, 1, 4, 0]), randn(4), "add"),
                 lambda: (randn(3, 2), torch.tensor([5, 0, 2]), randn(3), "replace"),
                 lambda: (randn(5), torch.tensor([[1], [3]]), randn(2, 3), "amax"),
                 lambda: (randn(5), torch.tensor([1, 3, 1, 1]), randn(4), "amin"),
                 # ties: g shared among the base's and the values' equal maxima
                 lambda: (torch.tensor([1.0, 2.0, 0.0], dtype=torch.float64), torch.tensor([0, 0, 2]),
                          torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64), "amax")],
    "check_indices": [lambda: (torch.tensor([0, -2, 3]), -3, 4)],
    "torch_call": [  # any torch function: its backward asks torch autograd
        lambda: (torch.nn.functional.softplus, randn(3, 4)),
        lambda: (torch.nn.functional.embedding, torch.randint(0, 6, (2, 3)), randn(6, 4)),
        lambda: (torch.conv2d, randn(2, 3, 6, 6), randn(4, 3, 3, 3), randn(4), 1, 1),  # its own rule
        lambda: (torch.conv1d, randn(2, 4, 9), randn(6, 2, 3), None, 2, 0, 1, 2),  # groups=2, stride 2
    ],
}


def substitute(args: Any, values: list[Any]) -> Any:
    """`args` with its tensors replaced, in order, by `values`."""
    it = iter(values)
    return map_structure(lambda v: next(it) if isinstance(v, torch.Tensor) else v, args)


def check_against_torch(op: str, args: tuple, kwargs: dict[str, Any] | None = None) -> None:
    kwargs = kwargs or {}
    tensors = [a for a in flatten(args) if isinstance(a, torch.Tensor)]
    graph = Graph()
    placeholders = [graph.placeholder(f"x{i}", TensorMeta.of(t)) for i, t in enumerate(tensors)]
    graph.output(graph.call(op, *substitute(args, placeholders), **kwargs))
    requires_grad = [t.dtype.is_floating_point for t in tensors]
    joint = differentiate(graph, requires_grad)
    verify(joint.graph, primitive_only=True)

    leaves = [t.detach().requires_grad_(r) for t, r in zip(tensors, requires_grad, strict=True)]
    eager = OPS[op].impl(*substitute(args, leaves), **kwargs)
    wrt = [leaf for leaf in leaves if leaf.requires_grad]
    tangents = [torch.randn_like(eager)] if joint.differentiable == [True] else []
    assert joint.differentiable == [eager.requires_grad]

    outputs = run_graph(joint.graph, *tensors, *tangents)
    torch.testing.assert_close(outputs[0], eager.detach(), equal_nan=True)
    grads = outputs[1:]
    assert len(grads) == len(wrt)
    if tangents:
        expected = torch.autograd.grad(eager, wrt, tangents[0], allow_unused=True, materialize_grads=True)
    else:
        expected = [torch.zeros_like(w) for w in wrt]
    for got, want in zip(grads, expected, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("op", PRIMITIVES)
def test_every_primitive_has_a_rule_or_a_reason(op: str) -> None:
    kinds = [op in VJP_RULES, op in NO_GRADIENT, op in NOT_DIFFERENTIABLE]
    assert kinds.count(True) == 1, f"{op}: add a VJP rule, or list it in NO_GRADIENT / NOT_DIFFERENTIABLE"


@pytest.mark.parametrize("op", [op for op in PRIMITIVES if op not in NOT_DIFFERENTIABLE])
def test_gradient_matches_torch(op: str) -> None:
    torch.manual_seed(0)
    for sample in SAMPLES[op]:
        check_against_torch(op, sample())


def test_addmm_scales() -> None:
    torch.manual_seed(0)
    check_against_torch("addmm", (randn(5), randn(3, 4), randn(4, 5)), {"beta": 0.5, "alpha": 2.0})


def test_a_random_torch_call_is_not_differentiable_but_fine_off_the_gradient_path() -> None:
    graph = Graph()
    x = graph.placeholder("x", TensorMeta((4,), torch.float64))
    noise_of = graph.placeholder("noise_of", TensorMeta((4,), torch.float64))
    graph.output(graph.call("mul", x, graph.call("torch_call", torch.rand_like, noise_of)))
    differentiate(graph, [True, False])  # the draw only reads `noise_of`: fine
    with pytest.raises(NotDifferentiable, match="rand_like is random"):
        differentiate(graph, [True, True])


def test_backward_nodes_keep_provenance_and_name_their_forward_node() -> None:
    graph = Graph()
    x = graph.placeholder("x", TensorMeta((4,), torch.float32))
    where = SourceLoc("user.py", 3, "y = torch.cos(x)")
    with graph.provenance(where):
        y = graph.call("cos", x)
    graph.output(y)
    joint = differentiate(graph, [True])
    backward = [n for n in joint.graph.compute_nodes() if "backward_of" in n.tags]
    assert {n.op for n in backward} >= {"sin", "mul", "neg"}
    assert all(n.source == where and n.tags["backward_of"] == joint.graph.nodes[2].name for n in backward)


def test_unreached_input_gets_zero_gradient_and_int_inputs_cannot_require_grad() -> None:
    graph = Graph()
    x = graph.placeholder("x", TensorMeta((3,), torch.float64))
    graph.placeholder("w", TensorMeta((3,), torch.float64))  # unused by the output
    graph.output(graph.call("exp", x))
    joint = differentiate(graph, [True, True])
    _, _, grad_w = run_graph(joint.graph, randn(3), randn(3), randn(3))
    torch.testing.assert_close(grad_w, torch.zeros(3, dtype=torch.float64))

    ints = Graph()
    i = ints.placeholder("i", TensorMeta((3,), torch.int64))
    ints.output(ints.call("neg", i))
    with pytest.raises(ValueError, match="floating-point"):
        differentiate(ints, [True])


def test_shared_values_accumulate_gradients() -> None:
    graph = Graph()
    x = graph.placeholder("x", TensorMeta((5,), torch.float64))
    s = graph.call("sin", x)
    graph.output((graph.call("mul", s, s), s))  # s reached along three paths, plus its own output
    joint = differentiate(graph, [True])
    x_val, t0, t1 = randn(5), randn(5), randn(5)
    *_, grad = run_graph(joint.graph, x_val, t0, t1)
    leaf = x_val.clone().requires_grad_()
    s_eager = leaf.sin()
    (expected,) = torch.autograd.grad((s_eager * s_eager, s_eager), leaf, (t0, t1))
    torch.testing.assert_close(grad, expected)
    assert isinstance(joint.graph.outputs[0], Node)
