"""The Python that model libraries (Hugging Face transformers) are written in, as small programs.

Each program must compile to one graph with no break and match eager on fresh inputs.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import inspect
from collections import OrderedDict
from typing import Any

import pytest
import torch

import minicompiler

from .conftest import compiles_whole


# -- imports inside functions ----------------------------------------------------------------------
def imports_inside(x):
    import math

    import torch.nn.functional as F
    from torch.nn import functional

    return F.relu(x) + functional.gelu(x) * math.pi


def test_import_of_a_loaded_module_is_a_constant() -> None:
    compiles_whole(imports_inside, torch.randn(4))


# -- dict methods and **kwargs ---------------------------------------------------------------------
def takes_kwargs(x, **kwargs):
    scale = kwargs.pop("scale", 2.0)
    kwargs.setdefault("shift", 1.0)
    options = dict(kwargs, extra=3.0)
    options.update({"more": 0.5})
    total = sum(v for k, v in options.items() if k in ("shift", "extra", "more"))
    assert "scale" not in kwargs and options.get("missing") is None
    return x * scale + total + len(options.keys()) + sum(options.values())


@pytest.mark.parametrize("kwargs", [{}, {"scale": 3.0}, {"scale": 3.0, "shift": -1.0}])
def test_dict_methods_on_kwargs(kwargs: dict) -> None:
    compiles_whole(takes_kwargs, torch.randn(4), **kwargs)


# -- function and code attributes ------------------------------------------------------------------
def adds_default(fn):
    @functools.wraps(fn)
    def wrapper(x, **kwargs):
        if "bias" in wrapper.__wrapped__.__code__.co_varnames and "bias" not in kwargs:
            kwargs["bias"] = float(len(inspect.signature(fn).parameters))
        return fn(x, **kwargs)

    return wrapper


@adds_default
def shifted(x, bias=0.0):
    return x + bias


def test_function_attributes_and_signature() -> None:
    assert shifted.__name__ == "shifted"
    compiles_whole(lambda x: shifted(x) * 2, torch.randn(4))


# -- is_compiling and torch._check ------------------------------------------------------------------
def compile_friendly(x):
    torch._check(x.shape[0] == 4, lambda: "four rows")
    if torch.compiler.is_compiling():
        return x * 2
    return torch.sin(x)  # would be the same number only by accident


def test_is_compiling_answers_true_during_capture() -> None:
    x = torch.randn(4)
    explained = minicompiler.explain(compile_friendly)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    assert explained.ops_per_graph[0] == ["mul"]


def checked(x, n):
    torch._check_is_size(n)  # 0 is a size: the int is not the condition
    torch._check_is_size(x.shape[0], max=16)
    torch._check_with(ValueError, x.dim() == 1, lambda: "one dim")
    torch._check_not_implemented(x.dtype == torch.float32, lambda: "float32 only")
    torch._check_index(n <= x.shape[0], lambda: "index")
    return x * (n + 1)


@pytest.mark.filterwarnings("ignore:_check_is_size will be removed")  # torch deprecates it, libraries still call it
@pytest.mark.parametrize("n", [0, 3])
def test_torch_check_assertions_leave_nothing_in_the_graph(n: int) -> None:
    x = torch.randn(4)
    explained = minicompiler.explain(checked)(x, n)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.to_text()
    torch.testing.assert_close(minicompiler.compile(checked)(x, n), checked(x, n))


# -- attribute writes on objects from outside, replayed after the graph ------------------------------
class Flag:
    def __init__(self) -> None:
        self.active, self.value = False, None

    def set(self, value: Any) -> None:
        self.active, self.value = True, value

    def reset(self) -> None:
        self.active, self.value = False, None


FLAG = Flag()


def with_flag(x, limit):
    FLAG.set(limit)
    y = x.clamp(max=FLAG.value) if FLAG.active else x
    FLAG.reset()
    FLAG.value = limit + 1  # the last write is the one that stays
    return y


def test_attribute_writes_are_replayed_after_the_graph() -> None:
    compiles_whole(with_flag, torch.randn(8), 0.5)
    FLAG.value = None
    minicompiler.compile(with_flag, backend="eager")(torch.randn(8), 0.5)
    assert (FLAG.active, FLAG.value) == (False, 1.5)


# -- a dataclass that is also an ordered dict (ModelOutput) -------------------------------------------
@dataclasses.dataclass
class Output(OrderedDict):
    hidden: torch.Tensor | None = None
    pooled: torch.Tensor | None = None
    extra: torch.Tensor | None = None

    def __post_init__(self) -> None:  # the fields that are set are the dict's items (as ModelOutput does)
        for field in dataclasses.fields(self):
            if getattr(self, field.name) is not None:
                self[field.name] = getattr(self, field.name)

    def __getitem__(self, key: str | int) -> Any:  # a name, or a position among the set fields
        return dict(self.items())[key] if isinstance(key, str) else self.to_tuple()[key]

    def to_tuple(self) -> tuple:
        return tuple(self[k] for k in self.keys())


def returns_output(x):
    out = Output(hidden=x * 2, pooled=x.sum(0))
    assert len(out) == 2 and "extra" not in out and list(out.keys()) == ["hidden", "pooled"]
    first, second = out.to_tuple()
    return Output(hidden=out["hidden"] + out[1], pooled=second * first.mean())


def test_dataclass_dict_made_inside_is_returned() -> None:
    got = compiles_whole(returns_output, torch.randn(3, 4))
    assert type(got) is Output and list(got.keys()) == ["hidden", "pooled"]


# -- builtins libraries lean on ------------------------------------------------------------------------
def builtins_used(x, mask):
    functions = [torch.sin, torch.cos]
    assert all(callable(f) for f in functions) and not any(callable(v) for v in (1, "a"))
    assert type(x) is torch.Tensor
    rows = torch.arange(x.shape[0])
    return x[rows, mask] + functions[0](x).sum()


def test_type_callable_all_any_and_tensor_indices() -> None:
    compiles_whole(builtins_used, torch.randn(4, 5), torch.tensor([0, 2, 4, 1]))


def test_a_keyword_left_out_is_another_compilation() -> None:
    def fn(x, mask=None):
        return x if mask is None else x * mask

    compiled = minicompiler.compile(fn, backend="eager")
    x, mask = torch.randn(4), torch.randn(4)
    compiled(x)
    torch.testing.assert_close(compiled(x, mask=mask), x * mask)


# -- objects of user classes made inside the function (a cache) -----------------------------------------
class Layer:
    def __init__(self) -> None:
        self.keys = torch.tensor([])  # empty until the first update, as transformers' DynamicLayer

    def update(self, k: torch.Tensor) -> torch.Tensor:
        self.keys = torch.cat([self.keys, k], dim=-2)
        return self.keys


class Cache:
    def __init__(self, layers: int) -> None:
        self.layers = [Layer() for _ in range(layers)]
        self.seen = 0

    @property
    def length(self) -> int:
        return self.keys_of(0).shape[-2]

    def keys_of(self, index: int) -> torch.Tensor:
        return self.layers[index].keys


def uses_a_cache(x):
    cache = Cache(layers=2)
    for layer in cache.layers:
        layer.update(x)
        layer.update(x * 2)
    cache.seen += cache.length
    assert isinstance(cache, Cache) and hasattr(cache, "seen") and getattr(cache, "missing", None) is None
    return cache.keys_of(1) + cache.seen, cache


def test_user_objects_made_inside_are_tracked_and_returned() -> None:
    got = compiles_whole(lambda x: uses_a_cache(x)[0], torch.randn(3, 4))
    assert got.shape == (6, 4)
    out, cache = minicompiler.compile(uses_a_cache, backend="eager")(torch.randn(3, 4))
    assert type(cache) is Cache and cache.seen == 6 and type(cache.layers[0]) is Layer
    torch.testing.assert_close(out, cache.layers[1].keys + 6)


# -- defaultdict, dict(pairs), torch.finfo, a module's own __call__ ------------------------------------
def collects(x):
    collected = collections.defaultdict(tuple)
    for name, value in dict(zip(["a", "b"], [x, x * 2], strict=True)).items():
        collected[name] += (value,)
    return collected["a"][0] + collected["b"][0] + torch.finfo(x.dtype).eps


class Checkpointed(torch.nn.Linear):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # as transformers 4's GradientCheckpointingLayer
        return super().__call__(*args, **kwargs) * 2


def test_defaultdict_pairs_finfo() -> None:
    compiles_whole(collects, torch.randn(4))


def test_a_module_with_its_own_call_is_inlined() -> None:
    layer = Checkpointed(4, 4)
    compiles_whole(lambda x: layer(x), torch.randn(2, 4))


def test_usage_logging_leaves_nothing_in_the_graph() -> None:
    # torchvision's stochastic_depth (in each ConvNeXt and EfficientNet block) logs its use first
    def block(x: torch.Tensor) -> torch.Tensor:
        torch._C._log_api_usage_once("torchvision.ops.stochastic_depth")
        return x.sin() + 1

    compiles_whole(block, torch.randn(4, 8))
