"""One worker of parallel Triton compilation (parallel_compile.py starts a few of these, once).

    python compile_worker.py

It imports Triton and waits. Each line on its stdin names a batch of work: a batch number, the
Triton cache folder to compile into, and a file holding a pickled list of compile requests:
(kernels file, module name, kernel name, signature, constexprs, attributes, target, options),
what Triton itself would have passed to `triton.compile` at each kernel's first launch. Each is
compiled, and its launcher built, into that cache, where that first launch then finds them; the
worker answers with a line: the batch number and how many requests compiled. It exits when its
stdin closes.

It runs as a script in a fresh interpreter and imports only Triton, never minicompiler or the
user's program. A request that fails is skipped (its kernel then compiles at its first launch,
in the parent, which raises its error where the user sees it).
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import sys
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


def compile_requests(requests_file: str) -> int:
    """Compile the requests in the file; how many compiled."""
    import triton
    from triton.compiler import ASTSource

    with open(requests_file, "rb") as f:
        requests = pickle.load(f)
    loaded: dict[str, ModuleType] = {}
    compiled_count = 0
    for path, module_name, kernel_name, signature, constexprs, attrs, target, options in requests:
        try:
            kernel = getattr(kernels_module(path, module_name, loaded), kernel_name)
            compiled = triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=target, options=options)
            build_launcher(compiled, target)
        except Exception as error:  # noqa: BLE001 - the parent compiles it again at its launch, and says why
            print(f"{kernel_name}: {type(error).__name__}: {error}", file=sys.stderr)
        else:
            compiled_count += 1
    return compiled_count


def serve() -> None:
    """Answer each batch named on stdin, until it closes."""
    import triton.compiler  # noqa: F401 - imported while the parent is still capturing its graph

    for line in sys.stdin:
        batch, cache_folder, requests_file = line.rstrip("\n").split("\t")
        os.environ["TRITON_CACHE_DIR"] = cache_folder  # Triton reads it at each compile
        print(batch, compile_requests(requests_file), flush=True)


if __name__ == "__main__":
    serve()
