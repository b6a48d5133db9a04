"""Compile and load generated code, cached on disk by a hash of the source.

    $MINICOMPILER_CACHE_DIR (default ~/.cache/minicompiler)/
        cpp/<hash>.cpp, cpp/<hash>.so      C++ kernels, built with g++, loaded with ctypes
        cpp/<hash>.so.sha256               the library's size and checksum, checked before loading it
        python/kernels_<hash>.py           Triton kernels (triton.jit reads real source files)

A second compile of the same source (in this process or a later one) is a lookup. Files are
written under a temporary name unique to the process and thread, then renamed (os.replace is
atomic), so processes and threads sharing the cache never see half a file. A library is loaded
only when its size and checksum match its sidecar: dlopen of a truncated .so (a full disk, a
killed process) can kill the process with SIGBUS, so a bad entry is rebuilt instead. Where the
cache directory cannot be written, kernels are built in a private temporary directory instead,
with a warning.
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
import tempfile
import threading
import warnings
from pathlib import Path
from types import ModuleType

from minicompiler.runtime import parallel_compile

CPP_FLAGS = (
    "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17",
    # GCC tunes for 256-bit vectors even where AVX-512 exists; math-heavy loops gain from 512
    "-mprefer-vector-width=512",
    # fast-math lets GCC reorder sums and call glibc's vector math (libmvec); NaN and inf
    # must still behave, so finite-math-only is switched back off. (Reassociation stays on: without
    # it sums and softmax ran 2x slower here; the price is a product of constants folded into one,
    # tests/decompose/test_rounding_and_inverse_trig.py's xfail.)
    "-ffast-math", "-fno-finite-math-only",
)

# hash (a library) or (hash, interpreted) (a Python module) -> it, loaded, for this process
_loaded: dict[str | tuple[str, bool], object] = {}
# One lock per key: two threads needing the same kernel build it once; different kernels build at once
_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()


class CompileError(RuntimeError):
    """The compiler rejected generated code (or there is no compiler)."""


def cache_dir() -> Path:
    return Path(os.environ.get("MINICOMPILER_CACHE_DIR") or Path.home() / ".cache" / "minicompiler")


_private: list[Path] = []  # this process's own kernel directory, made when the cache cannot be written


def _private_dir() -> Path:
    """Where kernels go when the cache directory cannot be written (a fresh temporary directory)."""
    with _key_locks_guard:
        if not _private:
            _private.append(Path(tempfile.mkdtemp(prefix="minicompiler-")))
    return _private[0]


def _writable_dir(kind: str) -> Path:
    """cache_dir()/kind, or a private directory (with a warning) if that cannot be written."""
    directory = cache_dir() / kind
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if os.access(directory, os.W_OK | os.X_OK):
            return directory
    except OSError:
        pass
    fallback = _private_dir() / kind
    fallback.mkdir(exist_ok=True)
    warnings.warn(f"minicompiler: the kernel cache {directory} cannot be written; "
                  f"building kernels in {fallback} for this process", stacklevel=4)
    return fallback


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


def _lock_for(key: str) -> threading.Lock:
    with _key_locks_guard:
        return _key_locks.setdefault(key, threading.Lock())


def _temporary_name(path: Path) -> Path:
    """A name beside `path` that no other process or thread uses (same suffix: g++ reads it)."""
    return path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp{path.suffix}")


def _write_atomically(path: Path, data: str | bytes) -> None:
    temporary = _temporary_name(path)
    if isinstance(data, str):
        temporary.write_text(data)
    else:
        temporary.write_bytes(data)
    os.replace(temporary, path)


def _fingerprint(path: Path) -> str:
    data = path.read_bytes()
    return f"{len(data)} {hashlib.sha256(data).hexdigest()}"


def _verified(library: Path) -> bool:
    """Whether `library` is whole: its size and checksum are those its sidecar recorded. A
    sidecar that disagrees (a truncated or overwritten library) gets a warning; a missing one
    (a writer killed between the two renames) means a plain rebuild."""
    try:
        recorded = library.with_name(library.name + ".sha256").read_text()
        if recorded == _fingerprint(library):
            return True
    except OSError:
        return False
    warnings.warn(f"minicompiler: the cached kernel {library} is damaged (its size or checksum differs "
                  "from when it was built); building it again", stacklevel=4)
    return False


def load_cpp(source: str) -> ctypes.CDLL:
    """The shared library built from C++ `source` (compiled on first use)."""
    key = _hash(source, _compiler(), " ".join(CPP_FLAGS), _machine())
    if key in _loaded:  # the hot path takes no lock
        return _loaded[key]  # type: ignore[return-value]
    with _lock_for(key):
        if key not in _loaded:
            places = [cache_dir(), *_private]
            library = next((p for d in places if _verified(p := d / "cpp" / f"{key}.so")), None)
            if library is None:
                library = _writable_dir("cpp") / f"{key}.so"
                _compile_cpp(source, library)
            _loaded[key] = ctypes.CDLL(str(library))
    return _loaded[key]  # type: ignore[return-value]


def _compile_cpp(source: str, library: Path) -> None:
    """Build `library` from `source`, then record its fingerprint (the library first: an entry
    whose sidecar is missing or stale is rebuilt, never loaded)."""
    cpp_file = library.with_suffix(".cpp")  # kept beside the library, for reading
    _write_atomically(cpp_file, source)
    temporary = _temporary_name(library)
    command = [_compiler(), *CPP_FLAGS, str(cpp_file), "-o", str(temporary)]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        message = f"the cpp backend needs a C++ compiler: {_compiler()!r} not found (set $CXX)"
        raise CompileError(message) from None
    if result.returncode != 0:
        raise CompileError(f"{' '.join(command)} failed:\n{result.stderr[-4000:]}")
    fingerprint = _fingerprint(temporary)
    os.replace(temporary, library)
    _write_atomically(library.with_name(library.name + ".sha256"), fingerprint)


def load_python_module(source: str) -> ModuleType:
    """Import Python `source` from a file in the cache (Triton's jit needs a real file). Imported
    under Triton's interpreter, its kernels are the interpreter's (`@triton.jit` decides when it
    decorates): kept apart from the compiled import of the same text, which a GPU program needs
    (a test that generated code under the interpreter handed its module to a later CUDA graph)."""
    interpreted = parallel_compile.interpreting()
    key = (_hash(source), interpreted)
    if key in _loaded:
        return _loaded[key]  # type: ignore[return-value]
    with _lock_for(str(key)):
        if key not in _loaded:
            _loaded[key] = _import_kernels(key[0], source, interpreted)
    return _loaded[key]  # type: ignore[return-value]


def _import_kernels(key: str, source: str, interpreted: bool) -> ModuleType:
    """The module of `source`, from its file in the cache; a file whose text differs from the
    source (damaged: the key is the source's hash) is written again first."""
    path = cache_dir() / "python" / f"kernels_{key}.py"
    try:
        intact = path.read_text() == source
    except (OSError, UnicodeDecodeError):
        intact = False
    if not intact:
        path = _writable_dir("python") / path.name
        _write_atomically(path, source)
    name = f"minicompiler_kernels_{key}{'_interpreted' if interpreted else ''}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # triton looks functions' modules up by name
    spec.loader.exec_module(module)
    return module
