"""Launching a generated Triton kernel with less Python per call.

`kernel[grid](*args, BLOCK=512, num_warps=2)` goes through `JITFunction.run` every time: it binds
the arguments, works out how to specialize on them (their dtypes, whether each pointer is 16-byte
aligned, whether an integer needs 64 bits), turns that into a cache key, finds the compiled
kernel and launches it. In a compiled graph's wrapper most of those answers never change: the
guards fix every dtype. `FastLauncher` keeps the compiled kernel per (device, pointer
alignment, integer value class, constexprs) and calls its launcher directly, as `JITFunction.run` does in
the end. A launch then costs a few microseconds of Python instead of tens, which matters when
a step is a handful of small kernels (a GPU training step of a small model is bound by
launches, not by the GPU). With a launch hook set (a profiler), every launch takes Triton's
own path.

The first launch for each key goes through `JITFunction.run`, which compiles if needed and
returns the compiled kernel. Under the Triton interpreter there is nothing compiled to keep:
`generate` uses the plain `kernel[grid]` there.

Tensors are passed to the compiled launcher as their addresses (ints). Given a tensor, Triton's
launcher asks it for `data_ptr()` and asks the CUDA driver whether that address is device
memory, for every pointer of every launch (a ResNet-18 training step passes ~1,500); the
addresses are read here anyway, once, for the alignment check. (The guards have already checked
that every input is on the kernel's device.) When all of them are 16-byte aligned, as memory
from torch's allocator is, the key holds that one fact instead of one per pointer.

Triton's launcher object is itself a Python layer (it sets up scratch memory, which most kernels
do not use) over a C function. Where its code is the one this module knows (`_direct_launch`
checks the source, not the version number), a kernel without scratch memory is launched by that
C function directly: a launch then costs ~4 us on the H100 instead of ~8.5 (runtime/triton_launch
timings in benchmarks/results).
"""

from __future__ import annotations

import functools
import inspect
import operator
import re
from collections.abc import Callable
from typing import Any

import torch

INT32 = range(-(2**31), 2**31)
DATA_PTR = torch.Tensor.data_ptr


class FastLauncher:
    """Stands in for a `@triton.jit` function in a wrapper: `launcher[grid](*args, **constexprs)`."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        params = kernel.params
        self.constexprs = [p.name for p in params if p.is_constexpr]
        # positional arguments are the runtime parameters, constexprs come last (as codegen writes them)
        self.usable = all(p.is_constexpr for p in params[len(params) - len(self.constexprs):])
        self.tensors: int | None = None  # how many arguments come first that are tensors (the buffers)
        # (device, pointer alignments and integer classes, the constexprs) -> (compiled kernel, how to launch it)
        self.compiled: dict[tuple, tuple[Any, Launch]] = {}

    def __getitem__(self, grid: tuple[int, ...]) -> functools.partial[None]:
        return functools.partial(self.launch, grid)

    def launch(self, grid: tuple[int, ...], *args: Any, **options: Any) -> None:
        # Every microsecond here is paid per kernel per call (ResNet-18's training step launches ~170):
        # the key and the run arguments are built with as few Python calls as will do.
        device = torch._C._cuda_getDevice()
        if self.tensors is None:
            self.tensors = next((i for i, arg in enumerate(args) if not isinstance(arg, torch.Tensor)), len(args))
        pointers = [*map(DATA_PTR, args[: self.tensors])]
        rest = args[self.tensors :]
        if functools.reduce(operator.or_, pointers, 0) % 16:  # some not aligned: one class per pointer
            key = (device, *map(_specialization, args), *options.values())
        else:
            key = (device, *map(_specialization, rest), *options.values())
        entry = self.compiled.get(key)
        if entry is None or not self.usable or _launch_hooks_set():
            compiled = self.kernel[grid](*args, **options)  # compiles if needed
            self.compiled[key] = (compiled, _launch_of(compiled, tuple(options[n] for n in self.constexprs)))
            return
        run, before, constexprs = entry[1]
        x, y, z = grid if len(grid) == 3 else (*grid, 1, 1)[:3]
        run(x, y, z, torch._C._cuda_getCurrentRawStream(device), *before, *pointers, *rest, *constexprs)


# How to launch a compiled kernel: a function, the arguments that come after (grid, stream) and
# before the kernel's own, and the constexpr values that come after them
Launch = tuple[Callable[..., None], tuple, tuple]


def _launch_of(compiled: Any, constexprs: tuple) -> Launch:
    """The call JITFunction.run ends with, without launch hooks or their metadata (none are set);
    where `_direct_launch` knows the launcher's code and the kernel has no scratch memory, the C
    launch function that the launcher object calls, with the arguments that object would add."""
    launcher = compiled.run
    if _direct_launch(type(launcher)) and not launcher.global_scratch_size and not launcher.profile_scratch_size:
        before = (compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl, None, None,
                  compiled.packed_metadata, None, None, None)
        return launcher.launch, before, constexprs
    return launcher, (compiled.function, compiled.packed_metadata, None, None, None), constexprs


# The body of the launcher's __call__ that `_launch_of` stands in for (Triton 3.6's CudaLauncher):
# scratch memory allocated when its size is positive (None otherwise), then one call of the C function.
_KNOWN_LAUNCHER_CALL = re.compile(
    r"def__call__\(self,gridX,gridY,gridZ,stream,function,\*args\):"
    r"defallocate_scratch\(size,align,allocator\):ifsize>0:.*?returnNone"
    r"global_scratch=allocate_scratch\(self\.global_scratch_size,self\.global_scratch_align,_allocation\._allocator\)"
    r"profile_scratch=allocate_scratch\(self\.profile_scratch_size,self\.profile_scratch_align,"
    r"_allocation\._profile_allocator\)"
    r"self\.launch\(gridX,gridY,gridZ,stream,function,self\.launch_cooperative_grid,self\.launch_pdl,"
    r"global_scratch,profile_scratch,\*args\)$")


@functools.cache
def _direct_launch(launcher_class: type) -> bool:
    """Is this launcher class's __call__ the code `_launch_of` replicates? Checked against its source
    (spaces and comments aside), not assumed from a version number: other Triton versions order
    the C function's arguments differently."""
    try:
        source = inspect.getsource(launcher_class.__call__)
    except (OSError, TypeError, AttributeError):
        return False
    code = "".join(line.split("#")[0] for line in source.splitlines())
    return _KNOWN_LAUNCHER_CALL.fullmatch(re.sub(r"\s+", "", code)) is not None


def _specialization(arg: Any) -> Any:
    """What Triton compiles a separate variant for, of one runtime argument."""
    if isinstance(arg, torch.Tensor):
        return arg.data_ptr() % 16 == 0
    if isinstance(arg, bool):
        return "bool"
    if isinstance(arg, int):  # width, and the values Triton may specialize on (unless told not to)
        return arg in INT32, arg == 1, arg % 16 == 0
    return type(arg)


_RUNTIME_KNOBS: Any = None  # triton.knobs.runtime, looked up once


def _launch_hooks_set() -> bool:
    """A profiler (Triton's proton, say) hooks launches: then every launch takes Triton's own path."""
    global _RUNTIME_KNOBS
    if _RUNTIME_KNOBS is None:
        from triton import knobs

        _RUNTIME_KNOBS = knobs.runtime
    return _hooked(_RUNTIME_KNOBS.launch_enter_hook) or _hooked(_RUNTIME_KNOBS.launch_exit_hook)


def _hooked(hook: Any) -> bool:
    # newer Triton always has a HookChain there, empty unless someone added a hook
    return hook is not None and bool(getattr(hook, "calls", True))
