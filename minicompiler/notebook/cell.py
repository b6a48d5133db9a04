"""A notebook cell as a Python function, so `%%compile` can compile it.

    y = torch.cos(x) * w          def cell_3(x, w):
    y.sum()               ->          y = torch.cos(x) * w
                                      return (y.sum(), {"y": y})

The parameters are the names the cell reads whose values are tensors, modules or arrays (the
inputs the compiled code is specialised on); every other name (torch, F, helpers, numbers) is
a global looked up in the notebook's namespace, as it is for the uncompiled cell. The function
returns the last expression's value and the names the cell assigns, which the magic puts back
into the namespace.

The function is compiled from the cell's own syntax tree, so its line numbers are the cell's;
the cell's text is registered with `linecache` under the function's filename, so tracebacks and
the compiler's provenance show the user's lines.
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda,
                  ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass
class CellFunction:
    function: Callable[..., tuple[Any, dict[str, Any]]]  # (*inputs) -> (value, assigned names)
    inputs: list[str]  # parameter names, read from the namespace on each call
    assigned: list[str]  # names the cell assigns, put back into the namespace
    filename: str  # "<minicompiler-cell-3>", registered with linecache
    source: str

    def arguments(self, namespace: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(namespace[name] for name in self.inputs)


def is_input_value(value: Any) -> bool:
    """Tensors, modules and numpy arrays are inputs; anything else is read as a global."""
    if isinstance(value, torch.Tensor | torch.nn.Module):
        return True
    return type(value).__module__ == "numpy" and type(value).__name__ == "ndarray"


class _Names(ast.NodeVisitor):
    """Names the cell reads (anywhere) and assigns (in its own scope, not in nested functions)."""

    def __init__(self) -> None:
        self.read: list[str] = []
        self.assigned: list[str] = []
        self._depth = 0

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.read.append(node.id)
        elif isinstance(node.ctx, ast.Store) and self._depth == 0:
            self.assigned.append(node.id)

    def _bind(self, name: str) -> None:
        if self._depth == 0:
            self.assigned.append(name)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            self._bind((alias.asname or alias.name).split(".")[0])

    visit_ImportFrom = visit_Import

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, _NESTED_SCOPES):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self._bind(node.name)
            self._depth += 1
            super().generic_visit(node)
            self._depth -= 1
        else:
            super().generic_visit(node)


def cell_function(cell: str, namespace: dict[str, Any], name: str, filename: str) -> CellFunction:
    """Turn the cell into a function `name` whose globals are `namespace`. A SyntaxError in the
    cell is raised as is, pointing at the cell's line."""
    linecache.cache[filename] = (len(cell), None, cell.splitlines(keepends=True), filename)
    tree = ast.parse(cell, filename)
    names = _Names()
    names.visit(tree)
    assigned = list(dict.fromkeys(names.assigned))
    read = list(dict.fromkeys(names.read))
    # Inputs: tensors/modules/arrays the cell reads; also any existing name the cell both reads
    # and assigns (`n = n + 1`), which a function would otherwise see as an unbound local.
    inputs = [n for n in read if n in namespace and (is_input_value(namespace[n]) or n in assigned)]
    body = list(tree.body)
    shows_value = bool(body) and isinstance(body[-1], ast.Expr) and not cell.rstrip().endswith(";")
    value = body.pop().value if shows_value else ast.Constant(None)
    returned = ast.Tuple([value, ast.Dict([ast.Constant(n) for n in assigned],
                                          [ast.Name(n, ast.Load()) for n in assigned])], ast.Load())
    last_line = body[-1] if body else tree  # where the `return` is reported to be
    body.append(ast.copy_location(ast.Return(returned), value if shows_value else last_line))
    function = ast.parse(f"def {name}({', '.join(inputs)}):\n    pass").body[0]
    function.body = body
    module = ast.Module([function], type_ignores=[])
    ast.fix_missing_locations(module)
    scope: dict[str, Any] = {}
    exec(compile(module, filename, "exec"), namespace, scope)
    return CellFunction(scope[name], inputs, assigned, filename, cell)
