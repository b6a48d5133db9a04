"""runtime.loader: compile once, cache on disk by source hash, clear errors."""

import os
import subprocess

import pytest

from minicompiler.runtime import loader

SOURCE = 'extern "C" int answer() { return %d; }\n'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINICOMPILER_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_cpp_is_compiled_once_and_found_on_disk_later(cache, monkeypatch):
    assert loader.load_cpp(SOURCE % 41).answer() == 41
    assert [p.suffix for p in sorted((cache / "cpp").iterdir())] == [".cpp", ".so", ".sha256"]
    monkeypatch.setattr(loader, "_loaded", {})  # as if in a new process

    def no_compiler(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(subprocess, "run", no_compiler)
    assert loader.load_cpp(SOURCE % 41).answer() == 41


def test_compiler_errors_are_reported(cache):
    with pytest.raises(loader.CompileError, match="error"):
        loader.load_cpp('extern "C" int broken( {')


def test_missing_compiler_is_a_clear_error(cache, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    with pytest.raises(loader.CompileError, match="needs a C\\+\\+ compiler"):
        loader.load_cpp(SOURCE % 7)


def test_python_modules_are_imported_from_the_cache(cache):
    module = loader.load_python_module("def f():\n    return 'hi'\n")
    assert module.f() == "hi"
    assert os.path.dirname(module.__file__) == str(cache / "python")
    assert loader.load_python_module("def f():\n    return 'hi'\n") is module
