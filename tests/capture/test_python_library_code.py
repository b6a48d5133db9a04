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


def compiles_whole(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Compile `fn`, check one graph and no break, and that two calls match eager."""
    compiled = minicompiler.compile(fn, backend="eager")
    for _ in range(2):
        fresh = [torch.randn_like(a) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                 for a in args]
        got, expected = compiled(*fresh, **kwargs), fn(*fresh, **kwargs)
        torch.testing.assert_close(_tensors(got), _tensors(expected))
    explained = minicompiler.explain(fn)(*args, **kwargs)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.to_text()
    assert not explained.eager_fallbacks, explained.eager_fallbacks
    return got


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


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


# -- functools.partial made outside: Hugging Face's tanh GELU ---------------------------------------
class PartialActivation(torch.nn.Module):
    """transformers' `PytorchGELUTanh` (Gemma's activation): a partial of F.gelu, called by forward."""

    def __init__(self) -> None:
        super().__init__()
        self.act = functools.partial(torch.nn.functional.gelu, approximate="tanh")
        self.scaled = functools.partial(torch.add, alpha=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scaled(self.act(x), x)


def test_a_partial_made_outside_is_called_with_its_own_arguments_first() -> None:
    module = PartialActivation()
    compiles_whole(module, torch.randn(4, 8))
    compiled = minicompiler.compile(module, backend="eager")
    x = torch.randn(4, 8)
    compiled(x)
    module.act = functools.partial(torch.nn.functional.gelu, approximate="none")  # another partial: guarded
    torch.testing.assert_close(compiled(x), module(x))


# -- assigning into part of a tensor: BART's shift_tokens_right ---------------------------------------
def shift_tokens_right(input_ids: torch.Tensor, start: int = 2, pad: int = 1) -> torch.Tensor:
    shifted = input_ids.new_zeros(input_ids.shape)
    shifted[:, 1:] = input_ids[:, :-1].clone()
    shifted[:, 0] = start
    shifted.masked_fill_(shifted == -100, pad)
    return shifted


def spelled_keys(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    x[..., 1, None] = v  # an ellipsis, a None, a value broadcast
    x[0, ::2] = 3.5  # a step
    x[1:, :, -1] = v.sum()  # a negative index, a 0-d tensor
    return x


def test_slice_and_index_assignments_are_captured() -> None:
    ids = torch.randint(-100, 50, (3, 7))
    torch.testing.assert_close(compiles_whole(shift_tokens_right, ids), shift_tokens_right(ids))
    compiles_whole(spelled_keys, torch.randn(2, 4, 3), torch.randn(2, 4, 1))
    compiled = minicompiler.compile(spelled_keys, backend="cpp")
    x, v = torch.randn(2, 4, 3), torch.randn(2, 4, 1)
    torch.testing.assert_close(compiled(x, v), spelled_keys(x, v))


def test_an_assignment_passes_gradients_as_eager() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = x * w
        y[:, 0] = w[0] ** 2  # the overwritten part's gradient is the value's, not y's
        return y

    compiled = minicompiler.compile(fn)
    x, w = torch.randn(4, 5), torch.randn(5)
    mine, theirs = w.clone().requires_grad_(), w.clone().requires_grad_()
    grad = torch.randn(4, 5)
    compiled(x, mine).backward(grad)
    fn(x, theirs).backward(grad)
    torch.testing.assert_close(mine.grad, theirs.grad)


def test_an_assignment_seen_through_a_view_falls_back_and_stays_right() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        row = y[0]  # a view of y: writing into y changes it
        y[0, 1:] = 0.0
        return row * 2

    compiled = minicompiler.compile(fn)
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), fn(x))


# -- a short list of ints as an index: Falcon's fused QKV split ----------------------------------------
LIST_INDEXES = {
    "falcon": lambda x: (x[..., :-2, :], x[..., [-2], :], x[..., [-1], :]),
    "first dim": lambda x: x[[1, 0]],
    "repeats": lambda x: x[:, [0, 2, 2]],
    "after an ellipsis": lambda x: x[..., [3, 0]],
    "an int apart": lambda x: x[1, :, [0, 2]],  # torch selects the int first (NumPy would not)
    "None around": lambda x: x[None, :, [1], None],
}


@pytest.mark.parametrize("name", sorted(LIST_INDEXES))
def test_a_short_list_of_ints_indexes_as_joined_slices(name: str) -> None:
    compiles_whole(LIST_INDEXES[name], torch.randn(2, 3, 5, 4))


def test_a_list_index_passes_gradients_as_eager() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x[:, [2, 0, 2]] * 3

    ours = torch.randn(4, 3, requires_grad=True)
    theirs = ours.detach().clone().requires_grad_()
    minicompiler.compile(fn)(ours).sum().backward()
    fn(theirs).sum().backward()
    torch.testing.assert_close(ours.grad, theirs.grad)


# -- a module that sets its own plain attribute in forward: Swin's shift size --------------------------
class ShrinksItsWindow(torch.nn.Module):
    """transformers' SwinLayer: `self.shift_size = 0` when the input is no larger than a window."""

    def __init__(self) -> None:
        super().__init__()
        self.shift_size, self.window = 2, 4
        self.scale = torch.nn.Parameter(torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] <= self.window:
            self.shift_size = 0
        return torch.roll(x, self.shift_size, -1) * self.scale


def test_a_plain_attribute_a_module_sets_is_written_after_the_graph() -> None:
    module = ShrinksItsWindow()
    compiled = minicompiler.compile(module, backend="eager")
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), ShrinksItsWindow()(x))
    assert module.shift_size == 0
    torch.testing.assert_close(compiled(x), module(x))  # the write seen by the next call's guards
    assert not compiled.reports[0].graph_breaks
    compiles_whole(ShrinksItsWindow(), torch.randn(3, 4))


def test_a_module_member_set_in_forward_still_breaks() -> None:
    class SetsAParameter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.w = torch.nn.Parameter(x.detach().clone())  # registers a new parameter: not captured
            return x * 2

    explained = minicompiler.explain(SetsAParameter())(torch.randn(3))
    assert any("assigning the attribute .w" in b.reason for b in explained.breaks), explained.to_text()


# -- a module looping over its own children: timm's RegNet stages --------------------------------------
class Stage(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        shared = torch.nn.Linear(4, 4)
        self.first, self.second, self.again = shared, torch.nn.Tanh(), shared  # one module twice: once

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.children():
            x = block(x)
        names = [name for name, _ in self.named_children()]
        return x * len(names)


def test_children_and_named_children_are_the_submodules_once_each() -> None:
    compiles_whole(Stage(), torch.randn(3, 4))


def test_dict_update_with_tensors() -> None:
    """transformers 4's Falcon: `cache_kwargs.update({"sin": sin, "cos": cos})`."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        kwargs = {"position": 1}
        kwargs.update({"sin": x.sin(), "cos": x.cos()})
        kwargs.update(tan=x.tan())
        return kwargs["sin"] + kwargs["cos"] * kwargs["tan"] + kwargs["position"]

    compiles_whole(fn, torch.randn(5))


# -- an assignment after a view made for one expression: transformers 4's padded causal mask -----------
def padded_mask(mask: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
    mask = mask.clone()
    length = attention.shape[-1]
    padding = (mask[:, :length] + attention) == 0  # a view of mask, dropped once the sum is made
    mask[:, :length] = mask[:, :length].masked_fill(padding, -1e9)
    return mask


def test_a_view_nothing_refers_to_any_more_does_not_block_an_assignment() -> None:
    mask, attention = torch.randn(4, 6), torch.randint(0, 2, (4, 5)).float()
    mask[0, 0] = -attention[0, 0]  # a sum of 0: padded
    compiles_whole(padded_mask, mask, attention)
