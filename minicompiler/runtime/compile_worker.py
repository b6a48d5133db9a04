"""One worker of parallel Triton compilation (parallel_compile.py starts a few of these).

    python compile_worker.py REQUESTS_FILE

REQUESTS_FILE holds a pickled list of compile requests: (kernels file, module name, kernel name,
signature, constexprs, attributes, target, options), what Triton itself would have passed to
`triton.compile` at the kernel's first launch. Each is compiled, and its launcher built, into
Triton's on-disk cache ($TRITON_CACHE_DIR, set by the parent to its own), where that first launch
then finds them.

It runs as a script in a fresh interpreter and imports only Triton, never minicompiler or the
user's program. A request that fails is reported on stderr and skipped: the kernel then
compiles at its first launch, in the parent, which raises its error where the user sees it.
"""

from __future__ import annotations

import importlib.util
import pickle
import sys
import time
from types import ModuleType


def kernels_module(path: str, name: str, loaded: dict[str, ModuleType]) -> ModuleType:
    """The kernels file imported under the parent's module name (Triton's cache key for a kernel
    hashes its source, its module's globals it reads, and its full name)."""
    if name not in loaded:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # triton looks functions' modules up by name
        spec.loader.exec_module(module)
        loaded[name] = module
    return loaded[name]


def build_launcher(compiled: object, target: object) -> None:
    """Build the kernel's launcher into the cache too. Triton launches a kernel through a small C
    module made for its argument types and built with the system's C compiler (~0.4 s) when the
    kernel is first launched; a ResNet-18 training step needs ~20 of them. Where this cannot be
    done (no CUDA driver library on this machine, another Triton), the launch builds it."""
    if getattr(target, "backend", None) != "cuda":
        return
    try:
        from triton.backends.nvidia.driver import CudaLauncher

        CudaLauncher(compiled.src, compiled.metadata)  # type: ignore[attr-defined]
    except Exception as error:  # noqa: BLE001 - the first launch builds it instead
        print(f"launcher not built: {type(error).__name__}: {error}", file=sys.stderr)


def main(requests_file: str) -> int:
    import triton
    from triton.compiler import ASTSource

    with open(requests_file, "rb") as f:
        requests = pickle.load(f)
    loaded: dict[str, ModuleType] = {}
    failures = 0
    for path, module_name, kernel_name, signature, constexprs, attrs, target, options in requests:
        start = time.perf_counter()
        try:
            kernel = getattr(kernels_module(path, module_name, loaded), kernel_name)
            compiled = triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=target, options=options)
            build_launcher(compiled, target)
        except Exception as error:  # noqa: BLE001 - the parent compiles it again at its launch, and says why
            print(f"{kernel_name}: {type(error).__name__}: {error}", file=sys.stderr)
            failures += 1
        else:
            print(f"{kernel_name} {time.perf_counter() - start:.3f}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
