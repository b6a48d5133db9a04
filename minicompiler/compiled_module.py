"""`minicompiler.compile(module)` returns a module: `CompiledModule`, torch.compile's OptimizedModule conventions.

Code written for `torch.compile` treats the compiled model as the model: it builds an optimizer
from `compiled.parameters()`, calls `compiled.train()` / `.eval()`, `.to(device)`, saves
`compiled.state_dict()`, reads `compiled.fc1`. So the wrapper is an `nn.Module` whose only child
is the original, `_orig_mod`: parameters, buffers, modes and devices are the original's (nothing
is copied), and only `forward` runs through the compiler.

Training flags, dtypes and devices need no special care here: capture guards them, so after
`.eval()` or `.double()` the next call recompiles (or finds the entry compiled for that mode).

state_dict keys: the original's, WITHOUT torch.compile's `_orig_mod.` prefix, so a checkpoint
saved from the compiled model loads into the plain one and back. `load_state_dict` accepts both
forms (checkpoints written by torch.compile'd models carry the prefix).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch import nn

if TYPE_CHECKING:
    from minicompiler.api import CompiledFunction
    from minicompiler.report import CompileReport

PREFIX = "_orig_mod."


class CompiledModule(nn.Module):
    """An nn.Module that runs `_orig_mod`'s forward through minicompiler. `.report` / `.reports`
    show the compilations; other attributes are read from the original, then from the compiled
    function (`.cache`, `.fn`, `.backend`...)."""

    def __init__(self, module: nn.Module, compiled: CompiledFunction) -> None:
        super().__init__()
        self._orig_mod = module  # the only child: parameters(), buffers(), train() reach it
        object.__setattr__(self, "_compiled", compiled)  # not a submodule: its `fn` is the original
        self.training = module.training
        self._register_state_dict_hook(_drop_prefix)
        self._register_load_state_dict_pre_hook(_add_prefix, with_module=True)

    @property
    def report(self) -> CompileReport | None:
        return self._compiled.report

    @property
    def reports(self) -> list[CompileReport]:
        return self._compiled.reports

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        module = self._orig_mod
        if isinstance(module, nn.parallel.DistributedDataParallel):
            return _ddp_forward(module, self._compiled, args, kwargs)
        if module._forward_hooks or module._forward_pre_hooks:
            return _call_with_hooks(module, self._compiled, args, kwargs)
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)  # _orig_mod itself (registered in _modules)
        except AttributeError:
            pass
        try:
            return getattr(self._orig_mod, name)
        except AttributeError:
            return getattr(self.__dict__["_compiled"], name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(self._orig_mod)))

    def __len__(self) -> int:  # nn.Sequential, nn.ModuleList
        return len(self._orig_mod)  # type: ignore[arg-type]

    def __bool__(self) -> bool:  # `if model:` is true for a module without a length, as for the original
        return bool(self._orig_mod)


def _call_with_hooks(module: nn.Module, compiled: CompiledFunction, args: tuple, kwargs: dict) -> Any:
    """The original's forward pre-hooks and hooks around the compiled forward, as `Module.__call__`
    runs them (capture compiles `forward` itself, which has no hooks)."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if key in module._forward_pre_hooks_with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    output = compiled(*args, **kwargs)
    for key, hook in list(module._forward_hooks.items()):
        if key in module._forward_hooks_with_kwargs:
            result = hook(module, args, kwargs, output)
        else:
            result = hook(module, args, output)
        if result is not None:
            output = result
    return output


def _ddp_forward(ddp: nn.parallel.DistributedDataParallel, compiled: CompiledFunction, args: tuple,
                 kwargs: dict) -> Any:
    """`compile(DistributedDataParallel(model))`: DDP's own forward (buffer broadcast, the
    reducer's bookkeeping) runs as is; the model inside it runs compiled. For this call, DDP's
    child `module` is the compiled model (the same parameters, so its gradient hooks still fire)."""
    inner = ddp._modules["module"]
    ddp._modules["module"] = CompiledModule(inner, compiled)
    try:
        return ddp(*args, **kwargs)
    finally:
        ddp._modules["module"] = inner


def _drop_prefix(module: nn.Module, state_dict: dict[str, Any], prefix: str, local_metadata: dict) -> None:
    """state_dict hook: `_orig_mod.fc1.weight` -> `fc1.weight` (and the per-module version metadata)."""
    for key in [k for k in state_dict if k.startswith(prefix + PREFIX)]:
        state_dict[prefix + key[len(prefix + PREFIX):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        inner = prefix + PREFIX[:-1]
        for key in [k for k in metadata if k == inner or k.startswith(inner + ".")]:
            metadata[(prefix + key[len(inner) + 1:]).rstrip(".")] = metadata.pop(key)


def _add_prefix(module: nn.Module, state_dict: dict[str, Any], prefix: str, *_: Any) -> None:
    """load_state_dict pre-hook: keys without `_orig_mod.` get it, so both forms load."""
    for key in [k for k in state_dict if k.startswith(prefix) and not k.startswith(prefix + PREFIX)]:
        state_dict[prefix + PREFIX + key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in [k for k in metadata if k.startswith(prefix) and not k.startswith(prefix + PREFIX[:-1])]:
            metadata[(prefix + PREFIX + key[len(prefix):]).rstrip(".")] = metadata[key]
