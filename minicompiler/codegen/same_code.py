"""Kernels that are one kernel under other names, written and compiled once.

A model repeats itself: ResNet's blocks, a transformer's layers. Their kernels differ only in the
names codegen gives them (the kernel's, its parameters' and in-place locals', taken from the
graph's nodes) and in the comments naming the nodes they compute. Each costs time at the first
call: Triton compiles it, builds a launcher for its signature and loads it. Here two kernels whose
code is the same once those names are taken out, and whose buffers have the same dtypes (Triton
compiles a variant per pointer dtype), are one kernel: the module defines the first, and the
wrapper launches it for both.

The names taken out are those the function binds: its runtime parameters (constexprs keep theirs,
the wrapper passes them by keyword) and the locals it assigns. They are renamed in order of first
appearance, so two kernels that read the same after renaming compute the same thing.
"""

from __future__ import annotations

import ast
import io
import tokenize

import torch


def same_code(sources: dict[str, str], dtypes: dict[str, tuple[torch.dtype, ...]]) -> dict[str, str]:
    """Kernel name -> the name of the first kernel (in `sources`' order) with the same code and
    buffer dtypes; a kernel unlike any before it maps to itself. `sources`: each kernel's text, a
    Python function; `dtypes`: each kernel's buffer dtypes in parameter order."""
    first: dict[tuple, str] = {}
    return {name: first.setdefault((_without_names(text), dtypes[name]), name) for name, text in sources.items()}


def shared_note(code_of: dict[str, str]) -> str | None:
    """The report's line on the kernels that launch another's code, if any do."""
    shared = [f"{name} -> {first}" for name, first in code_of.items() if name != first]
    if not shared:
        return None
    unique = len(set(code_of.values()))
    return (f"{len(shared)} of {len(code_of)} kernels are the same code as an earlier one (names aside) and "
            f"launch it: {unique} to compile ({', '.join(shared)})")


def _without_names(text: str) -> tuple[str, ...]:
    """The kernel's tokens, comments dropped, its own name and the names it binds numbered."""
    function = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef))
    bound = {a.arg for a in function.args.args if a.annotation is None}  # runtime parameters
    bound |= {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    renamed = {function.name: "KERNEL"}
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
              if t.type not in (tokenize.COMMENT, tokenize.NL)]
    out, depth = [], 0
    for index, token in enumerate(tokens):
        if token.type == tokenize.OP:
            depth += (token.string in "([{") - (token.string in ")]}")
        word = token.string
        after = tokens[index + 1].string if index + 1 < len(tokens) else ""
        before = tokens[index - 1].string if index else ""
        keyword_argument = depth > 0 and after == "="
        if token.type == tokenize.NAME and before != "." and not keyword_argument and (
                word in bound or word in renamed):
            word = renamed.setdefault(word, f"_{len(renamed)}")
        out.append(word)
    return tuple(out)
