"""The compiler pipeline for one captured graph, as a list of named steps.

    graph (torch-level ops)
      (-> autocast   only for calls inside torch.autocast: its casts made explicit; see autocast.py)
      -> replace     known patterns swapped for whole calls (conv+bn folding, attention -> SDPA)
      -> decompose   high-level ops become primitives
      -> simplify    algebraic rules, constant folding, CSE, DCE
      -> autograd    only when an input needs a gradient: joint graph -> forward + backward
      -> fuse        nodes grouped into kernels, with a reason for every refusal
      -> generate    C++ or Triton kernels plus a Python wrapper that calls them
      (-> autotune   mode="max-autotune": Triton block sizes timed on the first call)

Each step is timed and recorded in a GraphReport, and its result is kept in
`CompiledGraph.artifacts` so a notebook can step through them.

A graph whose inputs need gradients gets two programs: the inference one (a plain call, or one
under `torch.no_grad()`) and the training one (forward and backward graphs in a
`torch.autograd.Function`). Each is generated on the first call that needs it.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from minicompiler.autocast import AutocastError, apply_autocast, autocast_off, autocast_state
from minicompiler.autograd import JointGraph, NotDifferentiable, SavedTensor, differentiate, make_trainable, partition
from minicompiler.autograd.partition import distinct_gradients, recomputed_checkpoints
from minicompiler.autograd.recorded import record_library_calls
from minicompiler.codegen import CodegenError, CompiledModule, generate
from minicompiler.decompose import decompose
from minicompiler.fuse import fuse
from minicompiler.fuse.split_reductions import split_reductions
from minicompiler.ir import Graph, Node, TensorMeta, graph_to_python, run_graph
from minicompiler.ir.symbolic import size_code
from minicompiler.ir.transform import copy_graph
from minicompiler.layout import assign_layouts, follow_saved_layouts, too_few_convolutions, worth_channels_last
from minicompiler.replace import PASSES as REPLACE_PASSES
from minicompiler.replace.addmm_relu import addmm_relu, relus_of_addmm
from minicompiler.replace.bias_after_matmul import bias_after_matmul
from minicompiler.replace.max_pool_values import max_pool_values, picks_at_argmax
from minicompiler.report import CompileReport, GraphReport, StageRecord
from minicompiler.reporting import describe_fusion, describe_kernels, describe_schedule, node_lines
from minicompiler.runtime import parallel_compile, progress
from minicompiler.runtime.autotune import AutotunedModule
from minicompiler.runtime.cuda_graphs import CUDAGraphRunner
from minicompiler.simplify import simplify_with_log

BACKENDS = ("auto", "cpp", "triton", "eager")
Runner = Callable[[list[torch.Tensor]], Any]


def run_with_torch(graph: Graph) -> Runner:
    """Run a graph op by op with torch (the 'eager' backend and every fallback)."""
    return lambda inputs: run_graph(graph, *inputs)


@dataclass
class CompiledGraph:
    """A runnable compiled graph: `run(list of input tensors) -> output structure`."""

    graph: Graph  # as captured
    backend: str
    report: GraphReport
    requires_grad: list[bool]  # per input: was it compiled to receive a gradient
    strict: bool = False
    dynamic: bool = False
    cuda_graphs: bool = False  # mode="reduce-overhead": replay CUDA tensors' programs from CUDA graphs
    autotune: bool = False  # mode="max-autotune": Triton block sizes timed on the first call
    # the inputs (by position) whose new values the last outputs are, which the caller copies into
    # those inputs at once (so CUDA graphs may lend them rather than clone them); a kernel may
    # instead store a new value straight into its input (fuse/in_place.py), leaving nothing to copy
    written_back: tuple[int, ...] = ()
    # convolutions made channels-last (layout.py's layout optimization); None: on CUDA only
    channels_last: bool | None = None
    artifacts: dict[str, Any] = field(default_factory=dict)  # stage name -> its result
    _inference: Runner | None = None
    _training: Runner | None = None
    # (device type, dtype) of a torch.autocast region -> this graph compiled for it
    _autocast_variants: dict[tuple[str, torch.dtype], CompiledGraph] = field(default_factory=dict)
    # the call's report, once it is recorded: code generated later (on the first call that needs a
    # program, a first backward, a first autocast region) adds its time to the report's compile time
    compile_report: CompileReport | None = None

    def __post_init__(self) -> None:
        # where autocast could be on for this graph (checked on every call, so computed once)
        self.device_types = sorted({p.meta.device.type for p in self.graph.inputs if p.meta is not None} or {"cpu"})

    def run(self, inputs: list[torch.Tensor]) -> Any:
        return self.program_for(inputs)(inputs)

    def program_for(self, inputs: list[torch.Tensor]) -> Runner:
        """The program a call with these inputs runs, generated the first time one needs it."""
        if (region := autocast_state(self.device_types)) is not None:
            return self._autocast_program(region, inputs)
        if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
            if self._training is None:
                with self._generating("differentiating and generating code for"):
                    self._training = self._compile_training()
            return self._training
        if self._inference is None:
            with self._generating("generating code for"):
                self._inference = self._compile_inference()
        return self._inference

    @contextlib.contextmanager
    def _generating(self, what: str) -> Iterator[None]:
        """Generate a program with a progress bar, its time counted as compile time."""
        start = time.perf_counter()
        with progress.compiling(self.graph, what):
            yield
        if self.compile_report is not None:
            self.compile_report.compile_seconds += time.perf_counter() - start

    def has_program(self, training: bool) -> bool:
        """Is the program a call needs (training or not, outside autocast) generated already?"""
        program = self._training if training else self._inference
        return program is not None and autocast_state(self.device_types) is None

    def _autocast_program(self, region: tuple[str, torch.dtype], inputs: list[torch.Tensor]) -> Runner:
        """Kernels are generated for fixed dtypes, and autocast picks dtypes per op: the graph is
        compiled again with autocast's casts written into it, once per region kind."""
        if region not in self._autocast_variants:
            try:
                with self._generating("compiling for autocast"):
                    self._autocast_variants[region] = self._compile_for_autocast(region, inputs)
            except AutocastError as error:  # correct before fast: torch ops, under the same autocast
                self.report.fallback = f"{AUTOCAST_FALLBACK}: {error}"
                return run_with_torch(self.graph)
            self._autocast_variants[region].compile_report = self.compile_report
        with torch.autocast(region[0], enabled=False):  # the graph's casts are all there is now
            program = self._autocast_variants[region].program_for(inputs)

        def run_without_autocast(inputs: list[torch.Tensor]) -> Any:
            with torch.autocast(region[0], enabled=False):
                return program(inputs)

        return run_without_autocast

    def _compile_for_autocast(self, region: tuple[str, torch.dtype], inputs: list[torch.Tensor]) -> CompiledGraph:
        start = time.perf_counter()
        graph, casts = apply_autocast(self.graph, inputs)
        with autocast_off():
            variant = compile_graph(graph, self.backend, time.perf_counter() - start, self.strict, self.dynamic,
                                    self.requires_grad, self.cuda_graphs, self.autotune, self.written_back,
                                    self.channels_last)
        device, dtype = region
        variant.report.variant = f"torch.autocast({device!r}, dtype={dtype}): {casts} casts added"
        self.report.variants.append(variant.report)
        return variant

    # -- the two programs ------------------------------------------------------------------
    def _compile_inference(self) -> Runner:
        if self.backend == "eager":
            return run_with_torch(self.graph)
        graph = self.artifacts["simplify"]
        if picks_at_argmax(graph) or relus_of_addmm(graph):  # lowering may rewrite these in place; the
            graph = copy_graph(graph)  # training program differentiates the original (torch's gradients)
        in_place = self._in_place_candidates(graph)
        module = self._lower(graph, stage_suffix="", written_back=in_place)
        return (self._launcher(module, len(self.written_back), _positions(graph, in_place)) if module is not None
                else run_with_torch(self.graph))

    def _in_place_candidates(self, graph: Graph, saved: int = 0) -> dict[Node, Node]:
        """New value -> the input it goes into, for the kernels that may write it in place. None when
        max-autotune runs the program more than once per call on the same inputs (its trials): each
        run would change the input again. (A CUDA graph's warm-up runs put back what they change.)
        The new values end the graph's outputs, or come just before the `saved` tensors of a
        training forward; an input the forward saves for the backward keeps its old value."""
        if not self.written_back or self.autotune:
            return {}
        outputs = graph.outputs
        new_values = outputs[len(outputs) - saved - len(self.written_back): len(outputs) - saved]
        kept = set(graph.output_nodes()[len(graph.output_nodes()) - saved:]) if saved else set()
        return {value: graph.inputs[index] for value, index in zip(new_values, self.written_back, strict=True)
                if isinstance(value, Node) and value.op != "placeholder" and graph.inputs[index] not in kept}

    def _launcher(self, module: Runner, lend_last: int = 0, written: list[int] | None = None) -> Runner:
        """The program as called: replayed from CUDA graphs in mode="reduce-overhead", its last
        `lend_last` outputs (new values written back, a forward's saved tensors) lent uncopied;
        it may change its inputs at positions `written` in place."""
        return CUDAGraphRunner(module, lend_last, written or ()) if self.cuda_graphs else module

    def _compile_training(self) -> Runner:
        if self.backend == "eager":
            return run_with_torch(self.graph)  # torch ops: autograd records them as usual
        try:
            joint, record = _timed(self.report, "autograd", lambda: differentiate(
                self.artifacts["simplify"], self.requires_grad))
            # a replayed CUDA graph records nothing: there the backward runs library calls again
            recorded = [] if self.cuda_graphs else record_library_calls(joint)
            forward, backward, saved = partition(joint, "min_cut")
            record.text = f"saved for backward: {', '.join(s.name for s in saved) or 'nothing'}"
            record.text += "".join(f"\n{note}" for note in recorded)
            if recomputed := recomputed_checkpoints(backward):  # torch.utils.checkpoint regions
                record.text += f"\nrecomputed in the backward (checkpointed): {', '.join(recomputed)}"
            self._record_autograd(joint, forward, backward, saved)
            (forward, forward_log), (backward, backward_log) = simplify_with_log(forward), simplify_with_log(backward)
            record.notes += [f"backward: {note}" for note in distinct_gradients(backward)]
            # the rewrites of the rules (not CSE's and DCE's clean-ups) are levers a learner should see
            record.notes += [f"{part}: {line}" for part, log in (("forward", forward_log), ("backward", backward_log))
                             for line in log if line.startswith("algebraic:")]
            in_place = self._in_place_candidates(forward, len(saved))
            run_forward = self._lower(forward, " (forward)", fallback=False, keep_last=len(saved),
                                      written_back=in_place, training=True)
            follow_saved_layouts(forward, backward, len(saved))  # saved tensors arrive as the forward laid them out
            # The backward may free each saved tensor after its last use; not where a program runs
            # twice on one input list (CUDA graphs record and replay it, autotuning times trials)
            # the backward's outputs: the gradients of the inputs that need one, in order
            differentiated = [p.meta for p, wanted in zip(self.graph.inputs, self.requires_grad, strict=True) if wanted]
            run_backward = self._lower(backward, " (backward)", fallback=False,
                                       consume_inputs=not (self.cuda_graphs or self.autotune),
                                       gradients_of=differentiated)
        except (NotDifferentiable, CodegenError) as error:
            if self.strict and isinstance(error, CodegenError):
                raise
            # Correct before fast: torch ops, which autograd differentiates as usual.
            self.report.fallback = f"training runs with torch ops: {error}"
            return run_with_torch(self.graph)
        assert run_forward is not None and run_backward is not None
        lend_last = len(self.written_back) + len(saved)  # the forward's outputs end with these two groups
        return make_trainable(self._launcher(run_forward, lend_last, _positions(forward, in_place)),
                              self._launcher(run_backward), joint, saved, self.written_back)

    def _lower(self, graph: Graph, stage_suffix: str, fallback: bool = True,
               written_back: dict[Node, Node] | None = None, keep_last: int = 0,
               consume_inputs: bool = False, training: bool = False,
               gradients_of: list[TensorMeta] | None = None) -> Runner | None:
        """fuse + generate (+ autotune); None (and the reason in the report) if codegen fails and
        may fall back. `written_back`: new values a kernel may store into their inputs;
        `keep_last`: the last outputs are saved tensors (any layout will do); `training`: `graph`
        is a training step's forward; `gradients_of`: `graph` is a backward, its outputs the
        gradients of inputs with these metas."""
        report = self.report
        start = time.perf_counter()
        on_cuda = any(p.meta is not None and p.meta.device.type == "cuda" for p in graph.inputs)
        # gradients are worked out: a pick at the argmax is a max, and on a GPU a ReLU may join its
        # matmul (cuBLASLt's epilogue; on the CPU torch would run the same two passes)
        in_place = [("max pool values", max_pool_values)]
        if on_cuda:  # after addmm_relu, which takes the ReLUs into cuBLASLt's epilogue
            in_place += [("addmm relu", addmm_relu), ("bias after matmul", bias_after_matmul)]
        for name, rewrite_in_place in in_place:
            if notes := rewrite_in_place(graph):
                report.stages.append(StageRecord(name + stage_suffix, time.perf_counter() - start,
                                                 "\n".join(notes), language="text"))
                start = time.perf_counter()
        if self.backend == "triton" and (notes := split_reductions(graph)):  # few long rows: a GPU wants more
            report.stages.append(StageRecord("split reductions" + stage_suffix, time.perf_counter() - start,
                                             "\n".join(notes), language="text"))
            start = time.perf_counter()
        automatic = on_cuda and self.channels_last is None  # on by default on CUDA, where it pays
        convolutions_channels_last = worth_channels_last(graph) if automatic else bool(self.channels_last)
        # channels-last kept where torch keeps it (and, optimizing, for convolutions); a step only if any
        notes = too_few_convolutions(graph) if automatic else []
        if notes := notes + assign_layouts(graph, convolutions_channels_last, keep_last, training, gradients_of,
                                           replayed=self.cuda_graphs):
            report.stages.append(StageRecord("layout" + stage_suffix, time.perf_counter() - start, "\n".join(notes),
                                             language="text"))
        schedule, record = _timed(report, "fuse" + stage_suffix, lambda: fuse(graph, written_back))
        record.text, record.language = describe_schedule(schedule), "text"
        record.notes += schedule.written_back  # each changed input: written in place, or copied and why
        report.fusion += describe_fusion(schedule)
        try:
            module, record = _timed(report, "codegen" + stage_suffix,
                                    lambda: generate(schedule, self.backend, dynamic=self.dynamic,
                                                     consume_inputs=consume_inputs))
        except CodegenError as error:
            if self.strict or not fallback:
                raise
            # Correct before fast: a graph the backend cannot generate still runs, with torch ops.
            report.fallback = f"{self.backend} codegen failed: {error}"
            return None
        record.text, record.language = module.source, "python"
        record.notes += module.notes
        report.kernels += describe_kernels(schedule, module)
        self.artifacts["fuse" + stage_suffix] = schedule
        self.artifacts["codegen" + stage_suffix] = module
        if self.autotune and self.backend == "triton":
            return AutotunedModule(schedule, self.dynamic, functools.partial(self._record_tuning, stage_suffix))
        if self.autotune:
            record.notes.append("max-autotune: C++ kernels have no launch parameters to tune; built as by default")
        return module

    def _record_tuning(self, stage_suffix: str, module: CompiledModule, notes: list[str], seconds: float) -> None:
        self.report.stages.append(StageRecord("autotune" + stage_suffix, seconds, module.wrapper_source, notes=notes))
        self.artifacts["codegen" + stage_suffix] = module

    def _record_autograd(self, joint: JointGraph, forward: Graph, backward: Graph,
                         saved: list[SavedTensor]) -> None:
        report = self.report
        for name, graph in (("joint", joint.graph), ("forward", forward), ("backward", backward)):
            report.autograd.append(StageRecord(name, 0.0, graph_to_python(graph), node_lines=node_lines(graph)))
        report.saved_tensors = [f"{s.name}: {_dtype_name(s.dtype)}[{', '.join(map(size_code, s.shape))}]"
                                for s in saved]
        report.saved_bytes["compiled"] = sum(s.nbytes for s in saved)
        self.artifacts.update(joint=joint, forward=forward, backward=backward)


AUTOCAST_FALLBACK = "called inside a torch.autocast region: ran the captured graph with torch ops"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _positions(graph: Graph, in_place: dict[Node, Node]) -> list[int]:
    """Where the inputs that kernels may write in place are in `graph`'s input list."""
    targets = set(in_place.values())
    return [position for position, node in enumerate(graph.inputs) if node in targets]


def _timed(report: GraphReport, name: str, step: Callable[[], Any]) -> tuple[Any, StageRecord]:
    start = time.perf_counter()
    result = step()
    record = StageRecord(name, time.perf_counter() - start)
    report.stages.append(record)
    progress.stage(name)  # a large graph's progress bar, if one is up
    return result, record


def _replace_patterns(report: GraphReport, graph: Graph, backend: str, cuda_graphs: bool, training: bool) -> Graph:
    """The `replace` passes for `backend` (with CUDA graphs or not; `training`: compiled for a
    training step first); each one that rewrote something is its own step in the report (its
    rewrites as notes). A pass that matched nothing returns the graph unchanged and adds no step."""
    for name, replace_pass, runs_for, options in REPLACE_PASSES:
        if not runs_for(backend, cuda_graphs):
            continue
        rewrites: list[str] = []
        start = time.perf_counter()
        replaced = replace_pass(graph, rewrites, **options(training))
        if rewrites:
            graph = replaced
            report.stages.append(StageRecord(name, time.perf_counter() - start, graph_to_python(graph),
                                             notes=rewrites, node_lines=node_lines(graph)))
    return graph


def compile_graph(
    graph: Graph,
    backend: str,
    capture_seconds: float = 0.0,
    strict: bool = False,
    dynamic: bool = False,
    requires_grad: Sequence[bool] | None = None,
    cuda_graphs: bool = False,
    autotune: bool = False,
    written_back: Sequence[int] = (),
    channels_last: bool | None = None,
) -> CompiledGraph:
    """Take one captured graph through the stages for `backend` ("cpp", "triton" or "eager").

    The front stages run now; fuse and codegen run for the program the first call needs
    (`compiled.run` decides: training when grad is enabled and an input requires grad).
    requires_grad: per input, whether it gets a gradient (default: the inputs' metadata says).
    cuda_graphs: replay the generated programs from CUDA graphs (mode="reduce-overhead").
    autotune: time Triton launch configs on the first call of each program (mode="max-autotune").
    written_back: the graph's last outputs are new values of the inputs at these positions.
    channels_last: run convolutions channels-last (layout.py); None: on CUDA, for a graph with enough
    convolutions (layout.worth_channels_last).
    If code generation fails, `strict` re-raises the CodegenError; otherwise the graph runs with
    torch ops and the report says why."""
    report = GraphReport(backend)
    report.stages.append(
        StageRecord("capture", capture_seconds, graph_to_python(graph), node_lines=node_lines(graph))
    )
    if requires_grad is None:
        requires_grad = [p.meta is not None and p.meta.requires_grad for p in graph.inputs]
    compiled = CompiledGraph(graph, backend, report, list(requires_grad), strict, dynamic, cuda_graphs, autotune,
                             tuple(written_back), channels_last, {"capture": graph})
    if backend == "eager":
        return compiled
    if backend == "triton":  # the kernel compilers start while the stages before codegen run
        parallel_compile.start_workers()
    # the program the first call needs (pipeline.program_for) is the training one
    training = torch.is_grad_enabled() and any(requires_grad)
    graph = _replace_patterns(report, graph, backend, cuda_graphs, training)
    primitives, record = _timed(report, "decompose", lambda: decompose(graph))
    record.text, record.node_lines = graph_to_python(primitives), node_lines(primitives)
    (simplified, rewrites), record = _timed(report, "simplify", lambda: simplify_with_log(primitives))
    record.text, record.notes = graph_to_python(simplified), list(rewrites)
    record.node_lines = node_lines(simplified)
    compiled.artifacts.update(decompose=primitives, simplify=simplified)
    return compiled
