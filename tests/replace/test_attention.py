"""Attention replacement (seed 002): hand-written attention -> one scaled_dot_product_attention."""

from __future__ import annotations

import math
import os

import pytest
import torch
import torch.nn.functional as F

import minicompiler

B, H, L, D = 2, 3, 8, 16


def stage(compiled: object, name: str) -> tuple[list[str], str]:
    (graph_report,) = compiled.report.graphs
    record = next((s for s in graph_report.stages if s.name == name), None)
    return (record.notes, record.text) if record is not None else ([], "")  # no step: nothing matched


def replaced(compiled: object) -> bool:
    notes, text = stage(compiled, "replace attention")
    return bool(notes) and "scaled_dot_product_attention" in notes[0] and "ops.softmax" not in text


def qkv(requires_grad: bool = False) -> list[torch.Tensor]:
    return [torch.randn(B, H, L, D, requires_grad=requires_grad) for _ in range(3)]


def plain(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    scores = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(q.shape[-1]))
    scores = scores.masked_fill(hidden, float("-inf"))
    return scores.softmax(dim=-1) @ v


def additive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) * 0.25 + bias
    return torch.softmax(scores, dim=-1) @ v


HIDDEN = torch.ones(L, L, dtype=torch.bool).triu(1)  # causal: no row is hidden everywhere


def test_attention_without_mask_is_replaced() -> None:
    compiled = minicompiler.compile(plain)
    inputs = qkv()
    torch.testing.assert_close(compiled(*inputs), plain(*inputs))
    assert replaced(compiled)


def test_boolean_and_additive_masks_are_replaced() -> None:
    for fn, mask in ((causal, HIDDEN), (additive, torch.randn(B, 1, L, L))):
        compiled = minicompiler.compile(fn)
        inputs = qkv()
        torch.testing.assert_close(compiled(*inputs, mask), fn(*inputs, mask))
        assert replaced(compiled), fn.__name__


def test_backward_through_the_replacement_equals_eager() -> None:
    compiled = minicompiler.compile(causal)
    inputs = qkv(requires_grad=True)
    grad = torch.randn(B, H, L, D)
    got = torch.autograd.grad(compiled(*inputs, HIDDEN), inputs, grad)
    expected = torch.autograd.grad(causal(*inputs, HIDDEN), inputs, grad)
    torch.testing.assert_close(got, expected)
    assert replaced(compiled)


def test_patterns_that_differ_are_kept() -> None:
    def also_returns_probabilities(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
        p = torch.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1)
        return p @ v, p

    def fills_minus_a_billion(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = (q @ k.transpose(-2, -1) / 4.0).masked_fill(HIDDEN, -1e9)  # a hidden row differs from -inf
        return torch.softmax(scores, dim=-1) @ v

    for fn in (also_returns_probabilities, fills_minus_a_billion):
        compiled = minicompiler.compile(fn)
        inputs = qkv()
        torch.testing.assert_close(compiled(*inputs), fn(*inputs))
        assert stage(compiled, "replace attention") == ([], ""), fn.__name__


def test_an_explicit_sdpa_call_stays_one_call() -> None:
    def explicit(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    compiled = minicompiler.compile(explicit)
    inputs = qkv()
    torch.testing.assert_close(compiled(*inputs), explicit(*inputs))
    _, simplified = stage(compiled, "simplify")
    assert "scaled_dot_product_attention" in simplified and "ops.softmax" not in simplified


def test_dynamic_sequence_lengths_share_one_graph() -> None:
    compiled = minicompiler.compile(additive, dynamic=True)
    for length in (8, 12, 20):
        q, k, v = (torch.randn(B, H, length, D) for _ in range(3))
        bias = torch.randn(B, 1, length, length)
        torch.testing.assert_close(compiled(q, k, v, bias), additive(q, k, v, bias))
    assert len(compiled.reports) == 1, compiled.symbolic_off  # the SDPA call's shape is known in symbols
    assert replaced(compiled)


def heads_back_to_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Attention as a transformer block writes it: the heads' outputs side by side, then projected."""
    out = F.scaled_dot_product_attention(q, k, v)
    return out.transpose(1, 2).contiguous().reshape(B, L, H * D) @ weight


@pytest.mark.parametrize("backend", ["cpp", pytest.param("triton", marks=pytest.mark.triton_on_cpu_tensors)])
def test_the_attention_result_is_read_as_torch_lays_it_out(backend: str) -> None:
    """torch's fused attention kernels return their (B, S, H, D) output transposed: recorded so, the
    model's transpose back is row-major, its `.contiguous()` is nothing, and the projection reads
    the attention's output itself. Under torch's math kernel (row-major) the wrapper copies the
    result into that layout: the result is eager's either way, gradients too."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    compiled = minicompiler.compile(heads_back_to_rows, backend=backend)
    weight = torch.randn(H * D, 5, requires_grad=True)
    for kernels in ([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH], [SDPBackend.MATH]):
        inputs = qkv(requires_grad=True)
        with sdpa_kernel(kernels):
            out, expected = compiled(*inputs, weight), heads_back_to_rows(*inputs, weight)
            torch.testing.assert_close(out, expected)
            grads = torch.autograd.grad(out.sum(), [*inputs, weight])
            expected_grads = torch.autograd.grad(expected.sum(), [*inputs, weight])
        for ours, theirs in zip(grads, expected_grads, strict=True):
            torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    wrapper = compiled.report.graphs[0].stage("codegen (forward)").text
    lines = wrapper[wrapper.index("def call("):].splitlines()
    code = "\n".join(line for line in lines if not line.strip().startswith("#"))
    assert "laid_out(" in code and "clone" not in code and ".contiguous()" not in code, code


def packed_projection(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """q, k and v as views of one projection's output (B, L, 3, H, D), as a transformer's qkv gives them."""
    q, k, v = x.reshape(B, L, 3, H, D).permute(2, 0, 3, 1, 4)
    return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, L, H * D) @ weight


@pytest.mark.parametrize("backend", ["cpp", pytest.param("triton", marks=pytest.mark.triton_on_cpu_tensors)])
def test_attention_gradients_are_read_as_torch_lays_them_out(backend: str) -> None:
    """The fused backward's gradients for q, k and v come laid out as its output (on the CPU): the
    backward reads them there (no copies apart before they are put together as the projection's
    gradient); under torch's math kernel the wrapper copies them into that layout. Eager's
    gradients either way."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    compiled = minicompiler.compile(packed_projection, backend=backend)
    for kernels in ([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH], [SDPBackend.MATH]):
        x, weight = torch.randn(B * L, 3 * H * D, requires_grad=True), torch.randn(H * D, 5, requires_grad=True)
        with sdpa_kernel(kernels):
            out, expected = compiled(x, weight), packed_projection(x, weight)
            torch.testing.assert_close(out, expected)
            grads = torch.autograd.grad(out.sum(), [x, weight])
            expected_grads = torch.autograd.grad(expected.sum(), [x, weight])
        for ours, theirs in zip(grads, expected_grads, strict=True):
            torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    wrapper = compiled.report.graphs[0].stage("codegen (backward)").text
    after = wrapper[wrapper.index("= recorded_vjps("):].splitlines()[1:4]
    assert all("= laid_out(recorded_vjp" in line for line in after), after


def test_on_cuda_attention_gradients_are_laid_out_as_their_inputs() -> None:
    """CUDA's memory-efficient backward writes each gradient as its input is laid out (q, k, v of a
    packed projection: into one (B, L, 3, H, D) buffer); a row-major input's is row-major."""
    from minicompiler.ir import TensorMeta
    from minicompiler.ir.extern_layouts import result_strides

    cuda = torch.device("cuda")
    packed = TensorMeta((B, H, L, D), torch.float32, cuda, (L * 3 * H * D, D, 3 * H * D, 1))
    rows = TensorMeta((B, H, L, D), torch.float32, cuda)
    sdpa = F.scaled_dot_product_attention
    for argnum in range(3):
        assert result_strides("recorded_vjp", ("attention", None, sdpa, argnum, None, packed, packed, packed),
                              packed.shape) == packed.stride()
        assert result_strides("torch_call_vjp", (sdpa, argnum, None, rows, rows, rows), rows.shape) is None


def _hand_written_attention(device: torch.device, dtype: torch.dtype) -> tuple[object, object]:
    """softmax(q @ k^T * scale) @ v as capture writes it, its metas given (no tensor is made, so
    a CUDA graph can be built on a machine without one)."""
    from minicompiler.ir import Graph, TensorMeta

    def meta(*shape: int) -> TensorMeta:
        return TensorMeta(shape, dtype, device)

    graph = Graph()
    q, k, v = (graph.placeholder(name, meta(B, H, L, D)) for name in "qkv")
    keys = graph.append("transpose", (k, -2, -1), {}, TensorMeta((B, H, D, L), dtype, device, (H * L * D, L * D, 1, D)))
    scores = graph.append("matmul", (q, keys), {}, meta(B, H, L, L))
    scaled = graph.append("mul", (scores, 0.25), {}, meta(B, H, L, L))
    weights = graph.append("softmax", (scaled, -1), {}, meta(B, H, L, L))
    graph.output(graph.append("matmul", (weights, v), {}, meta(B, H, L, D)))
    return graph, scores


@pytest.mark.parametrize(("device", "dtype", "kept"), [("cuda", torch.float32, True), ("cuda", torch.float16, False),
                                                       ("cpu", torch.float32, False)])
def test_a_float32_training_step_on_a_gpu_keeps_the_hand_written_attention(device: str, dtype: torch.dtype,
                                                                           kept: bool) -> None:
    """There SDPA's backward is slower than our matmuls and fused softmax (module docstring); in
    half precision (flash attention) and on the CPU it is not, nor in inference anywhere."""
    from minicompiler.replace.attention import _chain, _faster_as_written

    graph, _ = _hand_written_attention(torch.device(device), dtype)
    end = graph.output_nodes()[0]
    assert _chain(end, graph.users()) is not None  # an attention, as the pass sees one
    assert _faster_as_written(end) is kept
    if kept:  # (a replacement would infer SDPA's result on a CUDA tensor: not on every machine)
        log: list[str] = []
        new = minicompiler.replace.replace_attention(graph, log, training=True)
        assert [n.op for n in new.compute_nodes()] == ["transpose", "matmul", "mul", "softmax", "matmul"]
        assert "kept as written" in log[0]


@pytest.mark.skipif(not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1", reason="needs a GPU")
def test_on_a_gpu_training_keeps_the_hand_written_attention_and_inference_replaces_it() -> None:
    q, k, v = (torch.randn(B, H, L, D, device="cuda", requires_grad=True) for _ in range(3))
    hidden, grad = HIDDEN.cuda(), torch.randn(B, H, L, D, device="cuda")
    training = minicompiler.compile(causal)
    got = torch.autograd.grad(training(q, k, v, hidden), (q, k, v), grad)
    torch.testing.assert_close(got, torch.autograd.grad(causal(q, k, v, hidden), (q, k, v), grad))
    assert "kept as written" in stage(training, "replace attention")[0][0]
    inference = minicompiler.compile(causal)
    with torch.no_grad():
        torch.testing.assert_close(inference(q, k, v, hidden), causal(q, k, v, hidden))
    assert replaced(inference)


def test_q_k_v_that_a_batched_matmul_would_copy_are_told_apart() -> None:
    """q, k, v sliced from one projection, or a (B, L, H, D) view transposed, cannot be viewed as
    (B*H, L, D): torch's matmul copies them each time it reads them, so a kept attention copies them
    once itself. Their strides are worked out from the views (the captured metas say only shapes)."""
    from minicompiler.ir import Graph, TensorMeta
    from minicompiler.replace.attention import _batches_merge

    graph = Graph()
    rows = graph.placeholder("rows", TensorMeta((B, H, L, D), torch.float32))
    heads_last = graph.placeholder("heads_last", TensorMeta((B, L, H, D), torch.float32))
    packed = graph.placeholder("packed", TensorMeta((B * L, 3 * H * D), torch.float32))
    transposed = graph.append("transpose", (heads_last, 1, 2), {}, TensorMeta((B, H, L, D), torch.float32))
    split = graph.append("reshape", (packed, (B, L, 3, H, D)), {}, TensorMeta((B, L, 3, H, D), torch.float32))
    moved = graph.append("permute", (split, (2, 0, 3, 1, 4)), {}, TensorMeta((3, B, H, L, D), torch.float32))
    q = graph.append("select", (moved, 0, 0), {}, TensorMeta((B, H, L, D), torch.float32))
    assert _batches_merge(rows)
    assert not _batches_merge(transposed) and not _batches_merge(q)


def hand_written_packed(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The MiniTransformer's attention: q, k, v sliced from one projection, softmax(q @ k^T * s) @ v."""
    batch, length = x.shape[0], x.shape[1]
    q, k, v = x.reshape(batch, length, 3, H, D).permute(2, 0, 3, 1, 4)
    scores = torch.softmax(q @ k.transpose(-2, -1) * D**-0.5, dim=-1)
    return (scores @ v).transpose(1, 2).reshape(batch, length, H * D) @ weight


@pytest.mark.parametrize("backend", ["cpp", pytest.param("triton", marks=pytest.mark.triton_on_cpu_tensors)])
def test_an_attention_kept_as_written_copies_q_k_v_once_and_matches_eager(backend: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The path a float32 GPU training step takes (the choice is made to take it here, on CPU
    tensors): q, k, v made contiguous by one kernel each, saved for the backward; eager's values and
    gradients, for fixed and for symbolic sequence lengths."""
    from minicompiler.replace import attention

    monkeypatch.setattr(attention, "_faster_as_written", lambda out: True)
    weight = torch.randn(H * D, 5, requires_grad=True)
    for dynamic in (False, True):
        compiled = minicompiler.compile(hand_written_packed, backend=backend, dynamic=dynamic)
        for length in (L, 12) if dynamic else (L,):
            x = torch.randn(B, length, 3 * H * D, requires_grad=True)
            out, expected = compiled(x, weight), hand_written_packed(x, weight)
            torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
            grads = torch.autograd.grad(out.sum(), [x, weight])
            for ours, theirs in zip(grads, torch.autograd.grad(expected.sum(), [x, weight]), strict=True):
                torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
        notes, _ = stage(compiled, "replace attention")
        made = "made contiguous" in notes[0]
        assert "kept as written" in notes[0] and made is not dynamic, notes  # symbolic sizes: left to torch
