"""Memory planning for the wrapper: free each buffer after its last use, reuse what was freed.

The wrapper's steps are blocks of lines. Planning them does two things:

1. Each buffer is deleted (`del x`) after the last step that names it, so a long program (a
   training backward) holds only what is still to be read, not every intermediate until it
   returns.
2. A kernel's output takes the memory of a dead buffer of exactly the same sizes, strides, dtype
   and device, instead of asking the allocator for new memory:

        sub_9 = mul_6  # reuses mul_6's memory: nothing reads mul_6 any more
        del mul_6

   An allocation is a call into torch's allocator, a few microseconds of host time each, and a
   ResNet-18 training step allocates ~440 buffers: what the GPU does is unchanged, the host
   issuing it gets faster (TorchInductor's wrappers reuse buffers the same way).

A buffer's memory is dead only when every name that may share it is dead: its views
(`reinterpret_tensor(x, ...)`, `ops.reshape(x, ...)`), a name it was written in place into, and
the result of any extern that read it (an op may hand back a view of its argument; these are
assumed to, unless known to return new memory). Only memory the wrapper allocated itself, with
sizes fixed for the whole call, is reused: never an input's, an output's, or one whose sizes are
read per kernel (`size0`), which differ from kernel to kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

IDENTIFIER = re.compile(r"(?<![.\w])[A-Za-z_]\w*")  # a name, not an attribute (ops.permute is no buffer)
ASSIGNMENT = re.compile(r"    (\w+(?:, \w+)*) = (.*)")  # one name, or several unpacked
ALLOCATION = re.compile(r"    (\w+) = (?:torch\.empty(?:_strided)?|empty_strided_cuda)\((.*)\)")
PER_KERNEL_SIZE = re.compile(r"\bsize[0-9]+\b")  # read again before each kernel: differs between them
NEVER = 1 << 62  # the last use of a name that outlives the call (an output, an input)


@dataclass
class MemoryPlan:
    lines: list[str]
    allocated: int = 0  # buffers the wrapper allocates
    reused: int = 0  # of those, how many take a dead buffer's memory instead

    def summary(self) -> str:
        """The report's note on the plan ("" when nothing is reused: nothing to say)."""
        if not self.reused:
            return ""
        return (f"memory plan: {self.reused} of the {self.allocated} buffers kernels write take the memory of a "
                "buffer no longer read (no allocation)")


def names_in(code: str) -> list[str]:
    """The names a line of the wrapper mentions (its comment left out)."""
    return IDENTIFIER.findall(code.split("#", 1)[0])


def plan_memory(blocks: list[list[str]], buffers: set[str], kept: set[str], fresh: set[str],
                pinned: set[str]) -> MemoryPlan:
    """The blocks' lines with `del` after last uses and dead memory reused. `buffers`: the names
    that hold tensors; `kept`: those that must stay alive (the outputs, the caller's inputs);
    `fresh`: extern results known to be new memory (not views of their arguments); `pinned`:
    buffers whose memory must not take a new value (a cache knows them by identity and memory)."""
    last_use = _last_uses(blocks, buffers, kept)
    sharing = _names_sharing_memory(blocks, buffers, fresh)
    # the step after which each allocation's memory is dead: when every name sharing it is
    dead_after = {root: NEVER if names & pinned else max(last_use.get(name, NEVER) for name in names)
                  for root, names in sharing.items()}
    reuse = _choose_reuse(blocks, dead_after)
    reused_roots = set(reuse.values())
    plan = MemoryPlan([])
    for index, block in enumerate(blocks):
        for line in block:
            allocation = ALLOCATION.fullmatch(line)
            if allocation is None:
                plan.lines.append(line)
                continue
            plan.allocated += 1
            name = allocation.group(1)
            if name not in reuse:
                plan.lines.append(line)
                continue
            plan.reused += 1
            old = reuse[name]
            plan.lines += [f"    {name} = {old}  # reuses {old}'s memory: nothing reads {old} any more",
                           f"    del {old}"]
        # a reused buffer's name stays bound until the step that takes its memory
        if done := sorted(n for n, last in last_use.items() if last == index and n not in reused_roots):
            plan.lines.append(f"    del {', '.join(done)}")
    return plan


def _last_uses(blocks: list[list[str]], buffers: set[str], kept: set[str]) -> dict[str, int]:
    """name -> the index of the last block naming it (NEVER for a kept one)."""
    last = {name: index for index, block in enumerate(blocks) for line in block for name in names_in(line)
            if name in buffers}
    return {name: NEVER if name in kept else index for name, index in last.items()}


def _names_sharing_memory(blocks: list[list[str]], buffers: set[str], fresh: set[str]) -> dict[str, set[str]]:
    """For each reusable allocation (a root), every name whose tensor may share its memory."""
    roots_of: dict[str, set[str]] = {}  # name -> the allocations it may share memory with
    sharing: dict[str, set[str]] = {}
    for line in (line for block in blocks for line in block):
        assignment = ASSIGNMENT.fullmatch(line.split("  #", 1)[0])
        if assignment is None:
            continue
        targets, value = assignment.groups()
        allocation = ALLOCATION.fullmatch(line)
        for name in targets.split(", "):
            if allocation is not None:
                roots_of[name] = set() if PER_KERNEL_SIZE.search(allocation.group(2)) else {name}
            elif name in fresh:
                roots_of[name] = set()  # new memory, not the wrapper's to reuse
            else:  # a view, a value written in place, an extern's result: it may share its arguments' memory
                roots_of[name] = set().union(*(roots_of.get(n, set()) for n in names_in(value) if n in buffers))
            for root in roots_of[name]:
                sharing.setdefault(root, set()).add(name)
    return sharing


def _choose_reuse(blocks: list[list[str]], dead_after: dict[str, int]) -> dict[str, str]:
    """New allocation -> the dead allocation whose memory it takes: the same spec (the text of
    sizes, strides, dtype and device), dead after an earlier step. Most recently freed first (its
    memory is the likeliest to be in a cache still)."""
    free: dict[str, list[str]] = {}  # spec -> dead allocations
    dying: dict[int, list[str]] = {}
    for root, index in dead_after.items():
        dying.setdefault(index, []).append(root)
    spec_of: dict[str, str] = {}
    reuse: dict[str, str] = {}
    for index, block in enumerate(blocks):
        for line in block:
            if (allocation := ALLOCATION.fullmatch(line)) is None or allocation.group(1) not in dead_after:
                continue
            name, spec = allocation.groups()
            spec_of[name] = spec
            if free.get(spec):
                reuse[name] = free[spec].pop()
        for root in sorted(dying.get(index, [])):
            free.setdefault(spec_of[root], []).append(root)
    return reuse
