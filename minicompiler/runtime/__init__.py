"""runtime: building and loading generated code (g++ for C++, importlib for Triton modules), cached on disk."""

from minicompiler.runtime.loader import CompileError, cache_dir, load_cpp, load_python_module

__all__ = ["CompileError", "cache_dir", "load_cpp", "load_python_module"]
