"""The on-disk kernel cache under damage: a truncated or overwritten library, a read-only cache
directory, two processes writing one entry. Results stay correct and nothing crashes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest
import torch

import minicompiler
from minicompiler.runtime import loader

SOURCE = 'extern "C" int answer() { return %d; }'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINICOMPILER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(loader, "_loaded", {})
    return tmp_path


def _forget_loaded(monkeypatch) -> None:
    """As a new process: nothing loaded yet, so the next load reads the disk."""
    monkeypatch.setattr(loader, "_loaded", {})


def _damage(path, data: bytes) -> None:
    """Put damaged bytes at `path` as a new file (this process has the old one mapped: changing
    it in place would SIGBUS the test itself, which is the crash the check before loading avoids)."""
    damaged = path.with_name("damaged")
    damaged.write_bytes(data)
    os.replace(damaged, path)


@pytest.mark.parametrize("damage", ["truncate", "random bytes"])
def test_a_damaged_library_is_rebuilt_with_a_warning(cache, monkeypatch, damage):
    assert loader.load_cpp(SOURCE % 5).answer() == 5
    (library,) = (cache / "cpp").glob("*.so")
    data = library.read_bytes()
    _damage(library, data[: len(data) // 3] if damage == "truncate" else os.urandom(len(data)))
    _forget_loaded(monkeypatch)
    with pytest.warns(UserWarning, match="damaged"):
        assert loader.load_cpp(SOURCE % 5).answer() == 5
    assert library.read_bytes() == data or loader._verified(library)


def test_a_library_without_its_checksum_is_rebuilt(cache, monkeypatch):
    """A writer killed between writing the library and its sidecar: never loaded unchecked."""
    assert loader.load_cpp(SOURCE % 6).answer() == 6
    (sidecar,) = (cache / "cpp").glob("*.sha256")
    sidecar.unlink()
    (library,) = (cache / "cpp").glob("*.so")
    _damage(library, b"\x7fELF")  # would SIGBUS or fail in dlopen
    _forget_loaded(monkeypatch)
    assert loader.load_cpp(SOURCE % 6).answer() == 6


def test_a_damaged_triton_kernel_file_is_rewritten(cache, monkeypatch):
    source = "def f():\n    return 'hi'\n"
    loader.load_python_module(source)
    (path,) = (cache / "python").glob("*.py")
    path.write_bytes(b"\xff\xfe garbage (")
    _forget_loaded(monkeypatch)
    assert loader.load_python_module(source).f() == "hi"


def test_kernels_imported_under_the_interpreter_are_not_handed_to_compiled_triton(cache, monkeypatch):
    """`@triton.jit` makes an interpreted function when $TRITON_INTERPRET is set as it decorates:
    a module of kernels imported then is not the one a GPU program gets later, with it unset (a
    test generating code under the interpreter gave a later test's CUDA graph interpreted kernels)."""
    source = "import triton\n\n\n@triton.jit\ndef kernel_nothing(p):\n    pass\n"
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    interpreted = loader.load_python_module(source)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    compiled = loader.load_python_module(source)
    assert compiled is not interpreted and len(list((cache / "python").glob("*.py"))) == 1  # one file
    assert type(interpreted.kernel_nothing).__name__ == "InterpretedFunction"
    assert type(compiled.kernel_nothing).__name__ == "JITFunction"
    assert loader.load_python_module(source) is compiled


@pytest.mark.parametrize("how", ["read-only", "not a directory"])
def test_an_unwritable_cache_builds_elsewhere_with_a_warning(cache, monkeypatch, how):
    if how == "read-only":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only directories")
        (cache / "cpp").mkdir()
        os.chmod(cache / "cpp", stat.S_IRUSR | stat.S_IXUSR)
    else:  # (root too cannot make a directory under a file)
        (cache / "file").write_text("")
        monkeypatch.setenv("MINICOMPILER_CACHE_DIR", str(cache / "file"))
    try:
        with pytest.warns(UserWarning, match="cannot be written"):
            assert loader.load_cpp(SOURCE % 7).answer() == 7
        fn = lambda x: torch.sin(x) * 2 + 1  # noqa: E731
        x = torch.randn(10)
        with pytest.warns(UserWarning, match="cannot be written"):
            torch.testing.assert_close(minicompiler.compile(fn, backend="cpp")(x), fn(x))
    finally:
        if how == "read-only":
            os.chmod(cache / "cpp", stat.S_IRWXU)


CHILD = textwrap.dedent("""
    import sys, torch, minicompiler
    fn = lambda x: torch.cos(x) * x + 3
    torch.manual_seed(int(sys.argv[1]))
    x = torch.randn(100)
    torch.testing.assert_close(minicompiler.compile(fn, backend="cpp")(x), fn(x))
    print("ok")
""")


def test_two_processes_write_one_entry(cache):
    env = {**os.environ, "MINICOMPILER_CACHE_DIR": str(cache)}
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(i)], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for i in range(2)]
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0 and out.strip() == "ok", err[-2000:]
    libraries = list((cache / "cpp").glob("*.so"))
    assert libraries and all(loader._verified(library) for library in libraries)
    assert not list((cache / "cpp").glob("*.tmp*"))  # no temporary file left behind


@pytest.mark.parametrize("thing", [5, "x", [1, 2]])
def test_compile_of_something_not_callable_fails_at_once(thing):
    with pytest.raises(TypeError, match="expects a function or nn.Module, but got"):
        minicompiler.compile(thing)
