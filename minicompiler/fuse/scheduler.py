"""`fuse(graph) -> Schedule`: group a primitive graph's nodes into kernels (a small
TorchInductor scheduler).

One greedy walk in execution order. Each pointwise or reduction node tries the kernels that
hold its producers, the most recent first, and joins the first that `can_fuse` accepts; if
it also reads another kernel with the same iteration space, that kernel is merged in (so
`cos(x) + sin(x)` is one kernel, not two). A node whose inputs are all buffers joins a
kernel that reads the same buffer, if one fits. A node that joins nothing starts a new kernel.
A view that only renames a kernel's value (see `rules.py`) joins that kernel; other views
become `Alias` steps, and extern ops `ExternCall` steps; every refusal is recorded with its
reason. Buffer planning (what is stored, and why) runs on the finished steps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from minicompiler.fuse.buffers import plan_buffers
from minicompiler.fuse.in_place import plan_in_place
from minicompiler.fuse.rules import SWEPT, can_fuse, iteration_space, kernel_refusal, view_refusal
from minicompiler.fuse.schedule import Alias, ExternCall, FusionDecision, Kernel, Schedule, Step
from minicompiler.ir.graph import Graph, Node
from minicompiler.ir.ops import INLINE, OPS
from minicompiler.ir.symbolic import is_symbolic
from minicompiler.ir.symbolic_shapes import reshape_view_strides

MAX_NAME_OPS = 5  # kernel names list at most this many ops, then "_etc"
SMALL_KERNEL = 4096  # elements: kernels this small that read only inputs run as one (`_join_input_only`)


class FuseError(ValueError):
    """The graph holds something `fuse` cannot schedule (a composite or unknown op)."""


def fuse(graph: Graph, written_back: Mapping[Node, Node] | None = None) -> Schedule:
    """Group `graph` (primitive ops only) into kernels, extern calls and aliases. `written_back`
    maps new values of inputs the graph changes to those inputs: a kernel may store one straight
    into its input's memory (see in_place.py)."""
    scheduler = _Scheduler(graph)
    for node in graph.compute_nodes():
        scheduler.visit(node)
    return scheduler.finish(written_back or {})


def _start_kernel(node: Node) -> Kernel:
    domain, dims = iteration_space(node)
    kind = "reduction" if OPS[node.op].kind in SWEPT else "pointwise"
    return Kernel("", kind, domain, dims, [node])


def _add(kernel: Kernel, node: Node) -> None:
    if OPS[node.op].kind in SWEPT and kernel.kind == "pointwise":
        kernel.kind, kernel.reduction_dims = "reduction", iteration_space(node)[1]
    kernel.nodes.append(node)


def _is_viewable(view: Node) -> bool:
    """Can torch make this view without copying (given its input's strides)?"""
    if view.op != "reshape":
        return True
    source = view.args[0].meta
    if source.is_contiguous():  # any reshape of a contiguous tensor is a view
        return True
    if is_symbolic(source.shape):  # torch's rule, written out for sizes that are symbols
        return reshape_view_strides(source.shape, source.stride(), view.meta.shape) is not None
    try:
        torch.empty_strided(source.shape, source.stride(), device="meta").view(view.meta.shape)
    except RuntimeError:
        return False
    return True


class _Scheduler:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.users = graph.users()
        self.steps: list[Step] = []
        self.owner: dict[Node, Step] = {}
        self.decisions: list[FusionDecision] = []

    # -- one method per kind of node ------------------------------------------------------
    def visit(self, node: Node) -> None:
        if node.op not in OPS:
            raise FuseError(f"{node.name}: unknown op {node.op!r}")
        kind = OPS[node.op].kind
        if kind == "composite":
            raise FuseError(f"{node.name}: {node.op} is not a primitive op; run decompose first")
        if kind == "view":
            self.view(node)
        elif kind == "extern":
            self.extern(node)
        elif node.op in INLINE and not self._needs_buffer(node):
            pass  # a constant (or an index): every kernel that reads it writes the value inline
        else:
            self.compute(node)

    def view(self, node: Node) -> None:
        source = node.args[0]
        if isinstance(kernel := self.owner.get(source), Kernel):
            decision = can_fuse(kernel, source, node)
            if decision.fused and (reason := self._needed_in_memory(kernel, node)) is not None:
                decision = FusionDecision(source, node, False, reason)
            self.decisions.append(decision)
            if decision.fused:
                _add(kernel, node)
                self.owner[node] = kernel
                return
        if _is_viewable(node):
            self._append(Alias(node), node)
        else:
            reason = "reshape of this layout cannot be a view: torch copies it into a new buffer"
            self._append(ExternCall(node, reason), node)

    def extern(self, node: Node) -> None:
        self._refuse_kernel_producers(node)
        self._append(ExternCall(node, f"{node.op} runs in torch"), node)

    def compute(self, node: Node) -> None:
        producers = [p for p in dict.fromkeys(node.inputs()) if p in self.owner]
        for producer in producers:  # extern outputs and views: recorded, never fused
            if not isinstance(self.owner[producer], Kernel):
                self.decisions.append(can_fuse(None, producer, node))
        candidates = sorted(
            {id(k): k for p in producers if isinstance(k := self.owner[p], Kernel)}.values(),
            key=self.steps.index, reverse=True,
        )
        for kernel in candidates:
            producer = [p for p in producers if self.owner[p] is kernel][-1]
            decision = can_fuse(kernel, producer, node)
            late = self._computed_after(kernel, node)
            if decision.fused and late is not None and self._hoist_inputs(kernel, node):
                late = None  # what it read later now runs before the kernel
            if decision.fused and late is not None:
                reason = f"reads {late.name}, computed after {_step_name(kernel)}"
                decision = FusionDecision(producer, node, False, reason)
            if decision.fused and (reason := self._better_apart(kernel, node)) is not None:
                decision = FusionDecision(producer, node, False, reason)
            self.decisions.append(decision)
            if decision.fused:
                # only older kernels remain: `node` reading a newer one would be refused above
                for older in candidates[candidates.index(kernel) + 1 :]:
                    self._try_merge(older, kernel, node)
                _add(kernel, node)
                self.owner[node] = kernel
                return
        if self._join_sibling(node) or self._join_input_only(node):
            return
        self._append(_start_kernel(node), node)

    def _join_sibling(self, node: Node) -> bool:
        """Join the latest kernel that reads one of `node`'s inputs too (horizontal fusion:
        `sum(x)` beside `sum(x * x)` loads x once per element instead of twice), or reads a value
        of the kernel that computes one (the second steps of a batch norm's split sums, each
        folding a partial sum of the same first kernel: one launch instead of four)."""
        shared = [i for i in node.inputs() if i.op not in INLINE]
        for kernel in reversed([s for s in self.steps if isinstance(s, Kernel)]):
            reads = {i for member in kernel.nodes for i in member.inputs()}
            common = [i for i in shared if i in reads or any(self._same_producer(i, r) for r in reads)]
            if (common and kernel_refusal(kernel, node) is None and self._computed_after(kernel, node) is None
                    and self._better_apart(kernel, node) is None):
                reason = f"shares input {common[0].name} with {_step_name(kernel)}"
                self.decisions.append(FusionDecision(common[0], node, True, reason))
                _add(kernel, node)
                self.owner[node] = kernel
                return True
        return False

    def _join_input_only(self, node: Node) -> bool:
        """A small computation that reads only the graph's inputs waits on nothing: it joins the
        first kernel of its iteration space that reads only inputs too. A batch norm in training
        counts its batches (`num_batches_tracked += 1`): 20 one-element kernels per ResNet-18
        training step, now one. Small only: a large one's consumers would rather fuse with it
        where it is."""
        if not self._small_and_reads_only_inputs(node, set()) or all(i.op != "placeholder" for i in node.inputs()):
            return False  # (index arithmetic, reading no input, is left to join what reads it)
        for kernel in (s for s in self.steps if isinstance(s, Kernel)):
            members = set(kernel.nodes)
            if (all(self._small_and_reads_only_inputs(m, members) for m in kernel.nodes)
                    and kernel_refusal(kernel, node) is None):
                self.decisions.append(FusionDecision(kernel.nodes[0], node, True, "reads only the graph's inputs, "
                                                     f"as {_step_name(kernel)} does: one launch for both"))
                _add(kernel, node)
                self.owner[node] = kernel
                return True
        return False

    def _small_and_reads_only_inputs(self, node: Node, members: set[Node]) -> bool:
        shape = node.meta.shape
        return (OPS[node.op].kind == "pointwise" and not is_symbolic(shape) and math.prod(shape) <= SMALL_KERNEL
                and all(i.op == "placeholder" or i.op in INLINE or i in members for i in node.inputs()))

    def _better_apart(self, kernel: Kernel, node: Node) -> str | None:
        """Why `node`, an element value of reduction `kernel`'s domain computed from the kernel's
        row values and from buffers, should rather not be computed there: every reader of it
        (through other element values) is a reduction over other dims, which runs in another
        kernel. Computed in `kernel`, it was stored for them and read back; apart, it joins their
        kernel and is never stored. Seed 001's numpy_fn normalizes X and Y by their columns'
        statistics, then sums along each row: the column kernel stored the three (1024, 640)
        results the row sums read (15 MB written and read back, per call)."""
        if kernel.kind != "reduction" or OPS[node.op].kind != "pointwise" or node.meta.shape != kernel.domain:
            return None
        if any(i in kernel.nodes and not kernel.is_row_value(i) for i in node.inputs()):
            return None  # apart, it would read an element value the kernel then stores: no gain
        if not self._reduced_only_over_other_dims(node, kernel, {}):
            return None
        return f"read only by reductions over other dims than {kernel.reduction_dims}: computed in their kernel"

    def _reduced_only_over_other_dims(self, node: Node, kernel: Kernel, known: dict[Node, bool]) -> bool:
        """Is every reader of `node` a reduction over other dims than `kernel`'s, or an element
        value of its domain that only such reductions read (`known`: the answers so far)?"""
        if node not in known:
            known[node] = False  # (a reader reached again on the way is no proof)
            known[node] = bool(self.users[node]) and all(
                self._reads_for_other_dims(reader, node, kernel, known) for reader in self.users[node])
        return known[node]

    def _reads_for_other_dims(self, reader: Node, node: Node, kernel: Kernel, known: dict[Node, bool]) -> bool:
        kind = OPS[reader.op].kind if reader.op in OPS else None
        if kind == "reduction":
            return reader.args[0] is node and iteration_space(reader) != (kernel.domain, kernel.reduction_dims)
        return (kind == "pointwise" and reader.meta.shape == kernel.domain
                and self._reduced_only_over_other_dims(reader, kernel, known))

    # -- helpers ----------------------------------------------------------------------------
    def _same_producer(self, a: Node, b: Node) -> bool:
        """Are `a` and `b` two values stored by one kernel?"""
        step = self.owner.get(a)
        return isinstance(step, Kernel) and self.owner.get(b) is step
    def _append(self, step: Step, node: Node) -> None:
        self.steps.append(step)
        self.owner[node] = step

    def _needs_buffer(self, node: Node) -> bool:
        """Does a graph output, an extern or a view read `node`, or a gather or scatter its memory
        (so it must be in memory)?"""
        return any(u.op == "output" or OPS[u.op].kind in ("extern", "view") or (u.op == "load_at" and u.args[0] is node)
                   or (OPS[u.op].kind == "scatter" and u.args[0] is node) for u in self.users[node])

    def _needed_in_memory(self, kernel: Kernel, view: Node) -> str | None:
        """Why `view` should rather be a buffer aliasing its input's (no copy): the graph's
        output or an extern reads it, or a view of it that cannot join `kernel`. A row value
        joins anyway: storing one value per row is cheaper than splitting the kernel."""
        if kernel.is_row_value(view):
            return None
        for user in self.users[view]:
            if user.op == "output" or OPS[user.op].kind == "extern":
                return f"{user.name} reads it from memory"
            if OPS[user.op].kind == "view" and (reason := view_refusal(kernel, user)) is not None:
                return f"{user.name} reads it from memory ({reason})"
        return None

    def _refuse_kernel_producers(self, node: Node) -> None:
        for producer in dict.fromkeys(node.inputs()):
            if isinstance(kernel := self.owner.get(producer), Kernel):
                self.decisions.append(can_fuse(kernel, producer, node))

    def _computed_after(self, kernel: Kernel, node: Node) -> Node | None:
        """An input of `node` from outside `kernel` whose step runs after `kernel`, if any."""
        position = self.steps.index(kernel)
        for inp in node.inputs():
            step = self.owner.get(inp)
            if step is not None and step is not kernel and self.steps.index(step) > position:
                return inp
        return None

    def _hoist_inputs(self, kernel: Kernel, node: Node) -> bool:
        """Move the steps making `node`'s inputs that run after `kernel` to just before it, so
        `node` can join it: e.g. `rsqrt(var)` per channel, or a reshape of a weight, that happened
        to be scheduled after the kernel computing `x - mean`. Only steps that do not need the
        kernel (directly or through other late steps) can move; True if all could."""
        position = self.steps.index(kernel)
        late = {id(s): s for i in node.inputs() if (s := self.owner.get(i)) is not None
                and s is not kernel and self.steps.index(s) > position}
        return all(self._hoist(step, kernel) for step in late.values())

    def _hoist(self, step: Step, kernel: Kernel) -> bool:
        for inp in _step_inputs(step):
            owner = self.owner.get(inp)
            if owner is None or owner is step or self.steps.index(owner) < self.steps.index(kernel):
                continue
            if owner is kernel or not self._hoist(owner, kernel):
                return False
        self.steps.remove(step)
        self.steps.insert(self.steps.index(kernel), step)
        return True

    def _try_merge(self, earlier: Kernel, later: Kernel, node: Node) -> None:
        """Move `earlier`'s nodes into `later` if the result is one valid loop nest and no step
        in between needs `earlier`'s values."""
        producer = [p for p in node.inputs() if self.owner.get(p) is earlier][-1]
        start, end = self.steps.index(earlier), self.steps.index(later)
        between = set(self.steps[start + 1 : end])
        reason = None
        for member in earlier.nodes:
            readers = {self.owner.get(u) for u in self.users[member]}
            if needed_by := readers & between:
                reason = f"{member.name} is needed by {_step_name(needed_by.pop())} in between"
                break
        if reason is None:
            merged = _start_kernel(earlier.nodes[0])
            for member in earlier.nodes[1:] + later.nodes + [node]:
                if (reason := kernel_refusal(merged, member) or self._better_apart(merged, member)) is not None:
                    break
                _add(merged, member)
        if reason is not None:
            self.decisions.append(FusionDecision(producer, node, False, f"cannot merge its kernel: {reason}"))
            return
        merged.nodes.pop()  # `node` itself joins after the merges
        later.kind, later.domain = merged.kind, merged.domain
        later.reduction_dims, later.nodes = merged.reduction_dims, merged.nodes
        self.steps.remove(earlier)
        for member in earlier.nodes:
            self.owner[member] = later
        self.decisions.append(FusionDecision(producer, node, True, "merged its kernel: same iteration space"))

    def finish(self, written_back: Mapping[Node, Node]) -> Schedule:
        self.steps = _stored_views_as_aliases(self.steps, self.users)
        used: set[str] = set()
        for kernel in (s for s in self.steps if isinstance(s, Kernel)):
            kernel.name = _kernel_name(kernel, used)
        buffers = plan_buffers(self.graph, self.steps)
        notes = plan_in_place(self.steps, buffers, written_back)
        return Schedule(self.graph, self.steps, buffers, self.decisions, notes)


def _stored_views_as_aliases(steps: list[Step], users: dict[Node, list[Node]]) -> list[Step]:
    """A view a kernel holds only to store it (none of its nodes reads it), of a value the kernel
    stores anyway, is an alias of that value's buffer after the kernel instead: one store, not
    two. A training batch norm's mean is stored as (C,) for the backward, and was stored again
    reshaped to (1, C, 1, 1) and detached for the normalization: three buffers of one value."""
    result: list[Step] = []
    for step in steps:
        result.append(step)
        if not isinstance(step, Kernel):
            continue
        members = set(step.nodes)
        stored = {n for n in step.nodes if any(u.op == "output" or u not in members for u in users[n])}
        aliases = [node for node in step.nodes if OPS[node.op].kind == "view" and node in stored
                   and not any(u in members for u in users[node]) and _is_viewable(node)
                   and _stored_apart(node.args[0], node, stored, members, users)]
        for node in aliases:
            step.nodes.remove(node)
            result.append(Alias(node))
    return result


def _stored_apart(source: Node, view: Node, stored: set[Node], members: set[Node],
                  users: dict[Node, list[Node]]) -> bool:
    """Is `source` in memory whether or not `view` is an alias of it: an input of the kernel, or a
    value it stores for another reader (an alias view of it counts once it is one)?"""
    if source not in members:
        return True
    return source in stored and any(u is not view and (u.op == "output" or u not in members) for u in users[source])


def _step_inputs(step: Step) -> list[Node]:
    nodes = step.nodes if isinstance(step, Kernel) else [step.node]
    return [i for n in nodes for i in n.inputs()]


def _step_name(step: Step | None) -> str:
    if isinstance(step, Kernel):
        return f"the kernel holding {step.nodes[-1].name}"
    return step.node.name if step is not None else "?"


def _kernel_name(kernel: Kernel, used: set[str]) -> str:
    """kernel_<ops in order>, e.g. kernel_amax_sub_exp_sum_div; long lists end in _etc."""
    ops = [n.op for n in kernel.nodes if OPS[n.op].kind != "view"]
    if len(ops) > MAX_NAME_OPS + 1:
        ops = ops[:MAX_NAME_OPS] + ["etc"]
    base = name = "kernel_" + "_".join(ops)
    suffix = 1
    while name in used:
        name, suffix = f"{base}_{suffix}", suffix + 1
    used.add(name)
    return name
