"""Compile and load generated code, cached on disk by a hash of the source.

    $MINICOMPILER_CACHE_DIR (default ~/.cache/minicompiler)/
        cpp/<hash>.cpp, cpp/<hash>.so      C++ kernels, built with g++, loaded with ctypes
        python/kernels_<hash>.py           Triton kernels (triton.jit reads real source files)

A second compile of the same source (in this process or a later one) is a lookup. Files are
written under a temporary name and renamed, so processes sharing the cache never see half
a file.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path
from types import ModuleType

CPP_FLAGS = (
    "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17",
    # GCC tunes for 256-bit vectors even where AVX-512 exists; math-heavy loops gain from 512
    "-mprefer-vector-width=512",
    # fast-math lets GCC reorder sums and call glibc's vector math (libmvec); NaN and inf
    # must still behave, so finite-math-only is switched back off
    "-ffast-math", "-fno-finite-math-only",
)

_loaded: dict[str, object] = {}  # hash -> loaded library or module, for this process


class CompileError(RuntimeError):
    """The compiler rejected generated code (or there is no compiler)."""


def cache_dir() -> Path:
    return Path(os.environ.get("MINICOMPILER_CACHE_DIR") or Path.home() / ".cache" / "minicompiler")


def _compiler() -> str:
    return os.environ.get("CXX", "g++")


@functools.cache
def _machine() -> str:
    """What a -march=native build depends on: the CPU's features (a shared cache may see several)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        flags = ""
    return f"{platform.machine()} {platform.processor()} {flags}"


def _hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def load_cpp(source: str) -> ctypes.CDLL:
    """The shared library built from C++ `source` (compiled on first use)."""
    key = _hash(source, _compiler(), " ".join(CPP_FLAGS), _machine())
    if key not in _loaded:
        library = cache_dir() / "cpp" / f"{key}.so"
        if not library.exists():
            _compile_cpp(source, library)
        _loaded[key] = ctypes.CDLL(str(library))
    return _loaded[key]  # type: ignore[return-value]


def _compile_cpp(source: str, library: Path) -> None:
    cpp_file = library.with_suffix(".cpp")  # kept beside the library, for reading
    _write_atomically(cpp_file, source)
    temporary = library.with_name(f"{library.stem}.{os.getpid()}.tmp.so")
    command = [_compiler(), *CPP_FLAGS, str(cpp_file), "-o", str(temporary)]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        message = f"the cpp backend needs a C++ compiler: {_compiler()!r} not found (set $CXX)"
        raise CompileError(message) from None
    if result.returncode != 0:
        raise CompileError(f"{' '.join(command)} failed:\n{result.stderr[-4000:]}")
    os.replace(temporary, library)


def load_python_module(source: str) -> ModuleType:
    """Import Python `source` from a file in the cache (Triton's jit needs a real file)."""
    key = _hash(source)
    if key not in _loaded:
        path = cache_dir() / "python" / f"kernels_{key}.py"
        if not path.exists():
            _write_atomically(path, source)
        name = f"minicompiler_kernels_{key}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # triton looks functions' modules up by name
        spec.loader.exec_module(module)
        _loaded[key] = module
    return _loaded[key]  # type: ignore[return-value]
