"""codegen: turn a Schedule into running code (C++ via g++, or Triton) plus a Python wrapper.

    module = generate(fuse(graph), backend="cpp")
    outputs = module([x, w])
    print(module.source)
"""

from minicompiler.codegen.common import CodegenError
from minicompiler.codegen.module import Backend, CompiledModule, generate

__all__ = ["Backend", "CodegenError", "CompiledModule", "generate"]
