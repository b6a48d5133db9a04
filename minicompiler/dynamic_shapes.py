"""Dynamic shapes for `CompiledFunction` (api.py): which dims are dynamic, one symbolic graph for
every size its size guards allow, and, where symbols cannot be used, one graph per set of sizes.

`dynamic=True` makes every dim of every argument dynamic; `dynamic=None` (the default) makes a
dim dynamic once a guard failed on its size alone, as TorchDynamo's automatic dynamic shapes do;
`dynamic=False` keeps every size exact. Sizes 0 and 1 always stay exact (they change broadcasting).
"""

from __future__ import annotations

import time

import torch

from minicompiler.capture import CaptureResult, Unsupported, capture, first_failing_guard
from minicompiler.report import CompileReport
from minicompiler.runtime.cache import CacheEntry, failed_size_guard

MAX_SIZES_PER_ENTRY = 32  # graphs kept per dynamic entry (one per set of sizes seen)


class DynamicShapes:
    """The dynamic-shape half of CompiledFunction, a mixin sharing its state: the settings (fn,
    dynamic, fullgraph), the cache and reports, dynamic_dims, symbolic_off, and its _compile,
    _compile_captured, _unrecorded_report and _symbols_allowed."""

    def _dynamic_dims_of(self, path: str, tensor: torch.Tensor) -> tuple[int, ...]:
        """The dims of the input at `path` whose guard accepts any size >= 2: all of them with
        dynamic=True (for arguments: parameters and buffers keep their sizes, as in Dynamo), those
        seen changing with dynamic=None, none with dynamic=False. Sizes 0 and 1 stay exact (they
        change broadcasting), and so do non-contiguous tensors' strides."""
        if self.dynamic is False or not tensor.is_contiguous():
            return ()
        is_argument = path.removeprefix("torch.from_numpy(").startswith(("args[", "kwargs["))
        dims = range(tensor.ndim) if self.dynamic and is_argument else sorted(self.dynamic_dims.get(path, ()))
        return tuple(d for d in dims if tensor.shape[d] >= 2)

    def _learn_dynamic_dims(self, args: tuple, kwargs: dict) -> None:
        """dynamic=None: when a tensor's guard failed only on sizes, those dims become dynamic
        from this recompile on (as TorchDynamo does)."""
        if self.dynamic is not None or not self.cache:
            return
        captured = self.cache[-1].captured
        failed = first_failing_guard(self.cache[-1].guards, args, kwargs)
        if failed is None or failed.kind != "tensor":
            return
        paths = [source.path for source in captured.input_sources]
        old = captured.graph.inputs[paths.index(failed.source)].meta
        try:
            new = failed.fetch(args, kwargs)
        except (AttributeError, IndexError, KeyError, TypeError):
            return  # not a size that changed: the argument is not there (f(x=t), then f(t))
        if not isinstance(new, torch.Tensor) or (new.ndim, new.dtype, new.device) != (old.ndim, old.dtype,
                                                                                        old.device):
            return
        changed = {d for d in range(new.ndim) if new.shape[d] != old.shape[d] and min(new.shape[d], old.shape[d]) >= 2}
        if changed:
            self.dynamic_dims.setdefault(failed.source, set()).update(changed)

    def _for_sizes(self, entry: CacheEntry, args: tuple, kwargs: dict) -> tuple[CacheEntry | None,
                                                                                CompileReport | None]:
        """The graph of a dynamic `entry` for this call's sizes, captured (and compiled to the
        same shape-generic kernels) the first time those sizes come; with the new report, if any."""
        if not entry.captured.dynamic_inputs:
            return entry, None
        reason = None
        if entry.captured.sizes is not None:  # one symbolic graph for all sizes its size guards allow
            reason = failed_size_guard(entry, args, kwargs)
            if reason is None:
                return entry, None
        sizes = entry.captured.dynamic_sizes(args, kwargs)
        if sizes == entry.sizes and reason is None:
            return entry, None
        variant = entry.variants.get(sizes)
        if variant is not None and first_failing_guard(variant.guards, args, kwargs) is None:
            return variant, None
        variant = self._compile(args, kwargs, reason, symbolic=False)
        if variant is not None:
            if len(entry.variants) >= MAX_SIZES_PER_ENTRY:
                entry.variants.pop(next(iter(entry.variants)))  # the oldest goes: recapturing is cheap
            entry.variants[sizes] = variant
        return variant, variant.report if variant is not None else None

    def _compile_symbolic(self, args: tuple, kwargs: dict, recompile_reason: str | None) -> CacheEntry | None:
        """Dynamic dims as symbols: one graph, one program for every size its guards allow. None
        when this call has no dynamic dims, or when symbolic sizes fail anywhere (the call is then
        compiled for its own sizes, as it would be without them: correct first, general second)."""
        if not self._symbols_allowed(args, kwargs):
            return None
        start = time.perf_counter()
        try:
            captured = capture(self.fn, args, kwargs, allow_breaks=not self.fullgraph,
                               dynamic_dims=self._dynamic_dims_of, symbolic=True)
        except Unsupported:
            return None  # captured again for these sizes, which reports the reason
        report = self._unrecorded_report(recompile_reason)  # recorded only if symbols work out
        entry = self._compile_with_symbols(captured, report, args, kwargs, start)
        if entry is not None:
            self.reports.append(report)
        return entry

    def _compile_with_symbols(self, captured: CaptureResult, report: CompileReport, args: tuple, kwargs: dict,
                              start: float) -> CacheEntry | None:
        """Compile a symbolic capture, and generate the program this call runs; None (nothing
        recorded in `report`) if it has no symbols or any stage fails on them."""
        if not captured.symbols:
            return None
        try:
            return self._compile_captured(captured, report, args, kwargs, start, prepare=True)
        except Exception as error:  # noqa: BLE001 - any stage that cannot take a symbol: sizes specialized
            self.symbolic_off = f"{type(error).__name__}: {error}"
            return None
