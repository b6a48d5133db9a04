"""Every composite op in the op table, decomposed and run against eager torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch

from minicompiler.decompose import DECOMPOSITIONS, DecompositionError, decompose
from minicompiler.ir import (
    OPS,
    Graph,
    OpDef,
    SourceLoc,
    TensorMeta,
    graph_to_python,
    map_structure,
    run_graph,
    verify,
)

SOURCE = SourceLoc("user.py", 7, "y = f(x)")


@dataclass(frozen=True)
class T:
    """A tensor argument: its shape and the range its random values are drawn from."""

    shape: tuple[int, ...]
    low: float = -3.0
    high: float = 3.0

    def sample(self, dtype: torch.dtype) -> torch.Tensor:
        if dtype == torch.bool:
            return torch.rand(self.shape) < 0.5
        if not dtype.is_floating_point:
            return torch.randint(int(self.low), int(self.high) + 1, self.shape, dtype=dtype)
        return torch.empty(self.shape, dtype=torch.float64).uniform_(self.low, self.high).to(dtype)


@dataclass(frozen=True)
class Index(T):
    """An integer tensor argument (indices, targets) in [low, high), whatever the float dtype."""

    def sample(self, dtype: torch.dtype) -> torch.Tensor:
        return torch.randint(int(self.low), int(self.high), self.shape)


@dataclass(frozen=True)
class Mask(T):
    """A bool tensor argument, whatever the float dtype."""

    def sample(self, dtype: torch.dtype) -> torch.Tensor:
        return torch.rand(self.shape) < 0.5


def case(*args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return args, kwargs


# op -> sample calls; every T becomes a graph input. Shapes: odd sizes, 0-d, broadcasting.
CASES: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {
    "sigmoid": [case(T((3, 5))), case(T(())), case(T((33,), -30, 30))],
    "relu": [case(T((2, 3, 5))), case(T(()))],
    "gelu": [case(T((3, 5))), case(T((3, 5)), approximate="tanh"), case(T(()), approximate="none")],
    "silu": [case(T((17,))), case(T((2, 1, 3)))],
    "clamp": [
        case(T((4, 5)), -0.5, 0.5),
        case(T((4, 5)), min=0.1),
        case(T((4, 5)), max=-0.2),
        case(T((4, 5)), T((5,), -1, 0), T((4, 1), 0, 1)),
    ],
    "mean": [
        case(T((3, 4, 5))),
        case(T((3, 4, 5)), (0, -1)),
        case(T((3, 4, 5)), 1, True),
        case(T(())),
        case(T((3, 4)), -1, dtype=torch.float64),
        case(T((0, 3)), 0),
    ],
    "var": [
        case(T((3, 4, 5))),
        case(T((3, 4, 5)), 1, correction=0, keepdim=True),
        case(T((6, 7)), (-1,), correction=2),
        case(T((1, 4)), 0),  # n - correction == 0: nan, as torch
    ],
    "std": [case(T((3, 4, 5))), case(T((5, 7)), [1, 0], correction=0, keepdim=True)],
    "softmax": [
        case(T((4, 7)), -1),
        case(T((3, 4, 5)), 1),
        case(T(()), 0),
        case(T((2, 9), -100, 100), 1),
        case(T((3, 5)), 0, dtype=torch.float64),
        case(T((0, 4)), 1),
    ],
    "log_softmax": [
        case(T((4, 7)), -1),
        case(T((3, 4, 5)), 0),
        case(T((2, 9), -100, 100), 1),
        case(T((3, 5)), 1, dtype=torch.float64),
    ],
    "layer_norm": [
        case(T((4, 7)), (7,)),
        case(T((2, 3, 8)), (3, 8), T((3, 8)), T((3, 8))),
        case(T((5, 6)), [6], None, T((6,)), eps=1e-3),
        case(T((3, 5), 10, 11), (5,), T((5,))),  # large mean, small spread
    ],
    "linear": [
        case(T((4, 6)), T((3, 6))),
        case(T((4, 6)), T((3, 6)), T((3,))),
        case(T((2, 5, 6)), T((3, 6)), T((3,))),
        case(T((6,)), T((3, 6)), T((3,))),
    ],
    "square": [case(T((3, 4))), case(T(()))],
    "transpose": [case(T((2, 3, 4)), 0, -1), case(T((3,)), 0, 0), case(T((3, 5)), 1, 0)],
    "unsqueeze": [case(T((2, 3)), -1), case(T((2, 3)), 1), case(T(()), 0)],
    "squeeze": [case(T((1, 3, 1))), case(T((1, 3, 1)), -1), case(T((1, 3, 1)), (0, 1)), case(T(()))],
    "select": [case(T((3, 4)), 1, -1), case(T((3, 4, 2)), 0, 2), case(T((5,)), 0, 3)],
    "contiguous": [case(T((3, 4)))],
    "softplus": [case(T((4, 5), -30, 30)), case(T((4, 5)), 2.0, 5.0)],
    "leaky_relu": [case(T((4, 5))), case(T((4, 5)), 0.2)],
    "hardtanh": [case(T((4, 5))), case(T((4, 5)), -0.5, 2.0)],
    "addcmul": [case(T((4, 5)), T((5,)), T((4, 1))), case(T((4, 5)), T((4, 5)), T(()), value=0.5)],
    "lerp": [
        case(T((4, 5)), T((4, 5)), 0.3),
        case(T((4, 5)), T((4, 5)), 0.7),
        case(T((4, 5)), T((5,)), T((4, 5), 0, 1)),
    ],
    "sinh": [case(T((4, 5))), case(T(()))],
    "cosh": [case(T((4, 5))), case(T((7,), -10, 10))],
    "exp2": [case(T((4, 5), -20, 20)), case(T(()))],
    "log2": [case(T((4, 5), 1e-3, 100)), case(T((3,), -1, 1))],  # negative values: nan, as torch
    "log10": [case(T((4, 5), 1e-3, 100))],
    "frac": [case(T((4, 5), -10, 10)), case(T(()))],
    "deg2rad": [case(T((4, 5), -360, 360))],
    "rad2deg": [case(T((4, 5)))],
    "hypot": [case(T((4, 5)), T((5,))), case(T((3, 1)), T((1, 4), 0, 0))],
    "logical_xor": [case(T((4, 5)), T((5,))), case(T((3, 4), 0, 0), T((3, 4)))],
    "softsign": [case(T((4, 5), -30, 30))],
    "hardsigmoid": [case(T((4, 5), -5, 5))],
    "hardswish": [case(T((4, 5), -5, 5)), case(T(()))],
    "mish": [case(T((4, 5), -20, 20))],
    "elu": [case(T((4, 5))), case(T((4, 5)), 0.5)],
    "celu": [case(T((4, 5))), case(T((4, 5)), 2.0)],
    "selu": [case(T((4, 5))), case(T((17,)))],
    # value tests, special functions, shrinkers (decompose/special.py)
    "isnan": [case(T((4, 5)))], "isinf": [case(T((4, 5)))], "isposinf": [case(T((4, 5)))],
    "isneginf": [case(T((4, 5)))], "isfinite": [case(T((4, 5)))],
    "sinc": [case(T((4, 5))), case(T((3,), 0, 0))],  # sinc(0) is 1
    "xlogy": [case(T((4, 5)), T((5,), 0.1, 3)), case(T((3,), 0, 0), T((3,), 0.1, 3))],
    "xlog1py": [case(T((4, 5)), T((5,), -0.9, 3))],
    "entr": [case(T((4, 5), 0, 3))],
    "heaviside": [case(T((4, 5)), T((5,)))],
    "fmax": [case(T((4, 5)), T((5,)))], "fmin": [case(T((4, 5)), T((4, 1)))],
    "logaddexp": [case(T((4, 5), -20, 20), T((5,), -20, 20))],
    "logaddexp2": [case(T((4, 5), -20, 20), T((5,), -20, 20))],
    "logsigmoid": [case(T((4, 5), -20, 20))],
    "tanhshrink": [case(T((4, 5)))],
    "float_power": [case(T((4, 5), 0.1, 3), T((5,), -2, 2))],
    "nan_to_num": [case(T((4, 5))), case(T((4, 5)), 1.5, 100.0, -7.0)],
    "logit": [case(T((4, 5), 0.05, 0.95)), case(T((4, 5), 0, 1), 0.1)],
    "hardshrink": [case(T((4, 5))), case(T((4, 5)), 1.0)],
    "softshrink": [case(T((4, 5))), case(T((4, 5)), 1.0)],
    "threshold": [case(T((4, 5)), 0.1, -2.0)],
    # signs and rounded divisions (decompose/rounding.py)
    "copysign": [case(T((4, 5)), T((5,))), case(T((4, 5)), -0.0)],
    "tril": [case(T((4, 5))), case(T((2, 3, 4)), -1)], "triu": [case(T((4, 5)), 2), case(T((5, 1)))],
    "round_decimals": [case(T((4, 5), -50, 50), 2), case(T((4, 5), -500, 500), -1)],
    "div_rounded": [case(T((4, 5), -9, 9), T((5,), 0.5, 3), "floor"),
                    case(T((4, 5), -9, 9), T((5,), -3, -0.5), "floor"),
                    case(T((4, 5), -9, 9), -0.7, "floor"), case(T((4, 5), -9, 9), T((5,), 0.5, 3), "trunc")],
    # reductions written with sum/amax/amin (decompose/reductions.py)
    "logsumexp": [case(T((4, 5), -20, 20), (1,)), case(T((3, 4, 5)), (0, 2), True)],
    "vector_norm": [case(T((4, 5))), case(T((4, 5)), 3, (1,), True), case(T((4, 5)), float("inf"), (0,))],
    "any": [case(T((4, 5), 0, 1)), case(T((4, 5), -1, 1), (1,), True)],
    "all": [case(T((4, 5), 0, 1)), case(T((4, 5), -1, 1), (0,))],
    "count_nonzero": [case(T((4, 5), 0, 1)), case(T((4, 5)), (1,))],
    "nansum": [case(T((4, 5))), case(T((3, 4, 5)), (2,), True)],
    # losses: the elementwise loss, then reduced (decompose/losses.py)
    "mse_loss": [case(T((4, 5)), T((4, 5))), case(T((4, 5)), T((4, 5)), "sum")],
    "l1_loss": [case(T((4, 5)), T((4, 5)), "none")],
    "smooth_l1_loss": [case(T((4, 5)), T((4, 5))), case(T((4, 5)), T((4, 5)), "sum", 0.5)],
    "huber_loss": [case(T((4, 5)), T((4, 5))), case(T((4, 5)), T((4, 5)), "none", 2.0)],
    "soft_margin_loss": [case(T((4, 5)), T((4, 5)))],
    "binary_cross_entropy": [case(T((4, 5), 0.05, 0.95), T((4, 5), 0, 1))],
    "binary_cross_entropy_with_logits": [
        case(T((4, 5)), T((4, 5), 0, 1)), case(T((4, 5)), T((4, 5), 0, 1), None, "sum", T((5,), 0.5, 2))],
    "kl_div": [case(T((4, 5)), T((4, 5), 0.05, 1), "batchmean"), case(T((4, 5)), T((4, 5)), "sum", True)],
    "margin_ranking_loss": [case(T((4, 5)), T((4, 5)), T((4, 5)), 0.1)],
    "hinge_embedding_loss": [case(T((4, 5)), T((4, 5)))],
    "poisson_nll_loss": [case(T((4, 5)), T((4, 5), 0, 3))],
    # gathers (decompose/gathers.py): one load_at at a formula of the coordinates
    "flip": [case(T((3, 4, 5)), (0, -1)), case(T(()), ())],
    "roll": [case(T((4, 5)), (2, -1), (0, 1)), case(T((3, 4)), (5,), ())],
    "repeat": [case(T((2, 3)), (2, 1, 2)), case(T((0, 3)), (2, 1))],
    "pad": [case(T((2, 3, 4)), (1, -1, 2, 0), "constant", 0.5), case(T((2, 3, 4)), (2, 3), "reflect"),
            case(T((1, 2, 3, 4)), (1, 2, 1, 0), "replicate"), case(T((2, 3, 4)), (-1, 2), "circular")],
    "gather": [case(T((3, 5)), 1, Index((3, 7), 0, 5)), case(T((4, 2)), 0, Index((2, 2), 0, 4))],
    "index_select": [case(T((5, 3)), 0, Index((7,), 0, 5)), case(T((2, 6)), -1, Index((), 0, 6))],
    "take": [case(T((3, 4)), Index((2, 5), -12, 12))],
    "embedding": [case(Index((2, 3), 0, 6), T((6, 4))), case(Index((5,), 0, 6), T((6, 4)), 2)],
    "diag_embed": [case(T((2, 3)), 1, 0, 2), case(T((4,)))],
    "diagonal_copy": [case(T((4, 5)), -1), case(T((2, 3, 4)), 1, 2, 0)],
    "slice_scatter": [case(T((3, 6)), T((3, 3)), 1, 1, None, 2), case(T((5, 2)), T((2, 2)), 0, -3, -1)],
    "diagonal_scatter": [case(T((4, 3)), T((3,)), -1)],
    "block_diag": [case(T((2, 3)), T((1, 4)), T((1, 1)))],
    "cartesian_prod": [case(T((3,)), T((2,)), T((4,)))],
    "index_fill": [case(T((3, 5)), 1, Index((3,), -5, 5), -2.0)],
    # scatters (decompose/scatters.py): store_at at positions a user gives; a write that replaces
    # gets one index per row (torch leaves repeated ones undefined), an accumulating one repeats
    "scatter": [case(T((3, 5)), 1, Index((3, 1), 0, 5), T((3, 1))), case(T((4, 2)), 0, Index((1, 2), 0, 4), 1.5)],
    "scatter_reduce": [case(T((3, 5)), 1, Index((3, 7), 0, 5), T((3, 7)), "sum"),
                       case(T((4, 2)), 0, Index((6, 2), 0, 4), T((6, 2)), "amax", include_self=False)],
    "index_add": [case(T((5, 3)), 0, Index((7,), 0, 5), T((7, 3)), alpha=2)],
    "index_copy": [case(T((5, 3)), 0, Index((1,), 0, 5), T((1, 3)))],
    "index_put": [case(T((4, 5)), (Index((6,), 0, 4),), T((6, 5)), True),
                  case(T((4, 5)), (Index((1,), -4, 4),), T((1, 5)), False)],
    "put": [case(T((3, 4)), Index((5,), -12, 12), T((5,)), True)],
    "masked_scatter": [case(T((3, 4)), Mask((3, 4)), T((12,))), case(T((2, 3)), Mask((3,)), T((7,)))],
    # pools and resizing (decompose/pooling.py, resizing.py): load_at over a window, then a reduction
    "avg_pool": [case(T((2, 3, 7, 6)), (3, 2), (2, 2), (1, 0), True, False, None),
                 case(T((2, 3, 9)), (4,), (3,), (2,), False, True, 3)],
    "max_pool": [case(T((2, 3, 7, 6)), (3, 3), (2, 1), (1, 1), (1, 2), False),
                 case(T((1, 2, 9)), (2,), (2,), (0,), (1,), True, True)],
    "max_pool_indices": [case(T((2, 3, 7, 6)), (3, 3), (2, 2), (1, 0), (1, 1), True)],
    "adaptive_avg_pool": [case(T((2, 3, 7, 5)), (3, 2)), case(T((2, 4, 5)), (7,))],
    "adaptive_max_pool": [case(T((2, 3, 7, 5)), (3, 4)), case(T((1, 2, 9)), (4,), True)],
    "adaptive_max_pool_indices": [case(T((2, 3, 7, 5)), (3, 2))],
    "upsample": [case(T((2, 3, 4, 5)), (8, 7), (None, None), "bilinear", False),
                 case(T((2, 3, 5)), (11,), (2.3,), "nearest", None),
                 case(T((1, 2, 4, 4)), (6, 6), (None, None), "bicubic", True)],
    "im2col": [case(T((2, 3, 6, 5)), (2, 3), (1, 1), (1, 0), (2, 1))],
    "unfold_copy": [case(T((3, 8)), 1, 3, 2)],
    "polygamma": [case(1, T((3, 4), 0.1, 4)), case(3, T((5,), 0.5, 3))],
    "mvlgamma": [case(T((3, 4), 1.6, 5), 3)],
}


def build(op: str, args: tuple[Any, ...], kwargs: dict[str, Any], dtype: torch.dtype) -> tuple[Graph, list]:
    """A one-op graph calling `op` (from user.py:7) on fresh random inputs of `dtype`, and the inputs."""
    graph, inputs = Graph(), []

    def to_input(spec: Any) -> Any:
        if not isinstance(spec, T):  # (an Index is a T too)
            return spec
        inputs.append(spec.sample(dtype))
        return graph.placeholder(f"in{len(inputs)}", TensorMeta.of(inputs[-1]))

    args, kwargs = map_structure(to_input, args), map_structure(to_input, kwargs)
    graph.output(graph.call(op, *args, source=SOURCE, **kwargs))
    return graph, inputs


COMPOSITES = sorted(name for name, op in OPS.items() if op.kind == "composite")
FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
TOLERANCE = {  # (rtol, atol): a few units in the last place of each dtype
    torch.float32: (2e-5, 1e-4),  # layer_norm of values 10..11 loses ~5 bits to cancellation, in torch too
    torch.float64: (1e-12, 1e-12),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (2e-2, 2e-2),
}


def decompose_and_compare(op: str, args: tuple, kwargs: dict, dtype: torch.dtype) -> Graph:
    """Decompose a one-op graph; check it is all primitives and matches eager torch."""
    graph, inputs = build(op, args, kwargs, dtype)
    primitives = decompose(graph)
    verify(primitives, primitive_only=True)
    expected = run_graph(graph, *inputs)  # the one-op graph runs `op` eagerly
    rtol, atol = TOLERANCE.get(dtype, (0, 0))
    torch.testing.assert_close(run_graph(primitives, *inputs), expected, rtol=rtol, atol=atol, equal_nan=True)
    return primitives


def reductions(graph: Graph) -> list:
    return [n for n in graph.compute_nodes() if OPS[n.op].kind == "reduction"]


@pytest.mark.parametrize("op", COMPOSITES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.filterwarnings("ignore:var.*degrees of freedom")  # the var case with n == correction
def test_composite_matches_eager(op: str, dtype: torch.dtype) -> None:
    # A composite added to the op table without sample calls in CASES fails here.
    for args, kwargs in CASES[op]:
        primitives = decompose_and_compare(op, args, kwargs, dtype)
        for node in primitives.compute_nodes():
            assert node.tags["origin"] == op
            assert node.source == SOURCE
        for node in reductions(primitives):
            _, dims, keepdim = node.args
            assert isinstance(dims, tuple) and list(dims) == sorted(set(dims)) and min(dims, default=0) >= 0
            assert isinstance(keepdim, bool)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm"])
def test_normalisations_reduce_with_keepdim(op: str) -> None:
    args, kwargs = CASES[op][1]
    for node in reductions(decompose_and_compare(op, args, kwargs, torch.float32)):
        assert node.args[2] is True


@pytest.mark.parametrize("op", ["mean", "var", "softmax", "layer_norm", "gelu"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_low_precision_computes_in_float32(op: str, dtype: torch.dtype) -> None:
    args, kwargs = CASES[op][0]
    primitives = decompose_and_compare(op, args, kwargs, dtype)
    math_nodes = [n for n in primitives.compute_nodes() if n.op != "convert"]
    assert math_nodes and all(n.meta.dtype == torch.float32 for n in math_nodes)
    assert primitives.output_nodes()[0].meta.dtype == dtype


@pytest.mark.parametrize(
    "op, dtype, args, kwargs",
    [
        ("relu", torch.int32, (T((3, 4)),), {}),
        ("clamp", torch.int64, (T((3, 4)),), {"min": -1, "max": 2}),
        ("clamp", torch.int64, (T((3, 4)), 0.5), {}),  # an int tensor clamped to a float: float
        ("square", torch.bool, (T((5,)),), {}),  # torch squares booleans as int64
        ("square", torch.int32, (T((5,)),), {}),
        ("sigmoid", torch.int64, (T((5,)),), {}),  # an int input gives float32
        ("hardtanh", torch.float32, (T((5,)), -2, 2), {}),
    ],
)
def test_integer_and_bool_inputs(op: str, dtype: torch.dtype, args: tuple, kwargs: dict) -> None:
    decompose_and_compare(op, args, kwargs, dtype)


def test_linear_uses_addmm_and_reshapes_nd_input() -> None:
    args, kwargs = case(T((2, 5, 6)), T((3, 6)), T((3,)))
    ops = [n.op for n in decompose_and_compare("linear", args, kwargs, torch.float32).compute_nodes()]
    assert ops == ["permute", "reshape", "addmm", "reshape"]


def test_softmax_is_stable_for_large_inputs() -> None:
    graph = Graph()
    x = graph.placeholder("x", TensorMeta((2, 3), torch.float32))
    graph.output(graph.call("softmax", x, -1))
    data = torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]])
    result = run_graph(decompose(graph), data)
    assert torch.isfinite(result).all()
    torch.testing.assert_close(result, torch.softmax(data, -1))


def test_decompose_leaves_its_input_alone() -> None:
    graph, _ = build("layer_norm", *CASES["layer_norm"][1], torch.float32)
    before = graph_to_python(graph)
    decompose(graph)
    assert graph_to_python(graph) == before


def test_decompose_twice_changes_nothing() -> None:
    graph, _ = build("gelu", *CASES["gelu"][0], torch.float32)
    once = decompose(graph)
    assert graph_to_python(decompose(once)) == graph_to_python(once)


def test_composite_without_decomposition_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(OPS, "mystery", OpDef("mystery", "composite", torch.neg))
    graph = Graph()
    graph.output(graph.call("mystery", graph.placeholder("x", TensorMeta((3,), torch.float32))))
    with pytest.raises(DecompositionError, match="no decomposition for composite op 'mystery'"):
        decompose(graph)


def test_decomposition_that_changes_dtype_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DECOMPOSITIONS, "relu", lambda ops, x: ops.convert(x, torch.float64))
    graph, _ = build("relu", *CASES["relu"][0], torch.float32)
    with pytest.raises(DecompositionError, match="decomposition of relu"):
        decompose(graph)
