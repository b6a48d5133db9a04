"""mode="max-autotune": Triton launch configs timed on the first call (through the Triton
interpreter here: the choice is meaningless for speed, but the mechanism and the results are real)."""

import pytest
import torch
import torch.nn.functional as F

import minicompiler
from minicompiler.codegen.triton import MANY_PROGRAMS, candidate_configs, launch_config
from minicompiler.fuse import fuse
from minicompiler.ir import Graph, TensorMeta


def softmax_of_cosines(x, w):
    return F.softmax(torch.cos(x) @ w, dim=-1) * 2


def kernels_of(shape, op):
    g = Graph()
    x = g.placeholder("x", TensorMeta(shape, torch.float32))
    g.output(g.call("sum", x, (1,), True) if op == "sum" else g.call("cos", x))
    return fuse(g).kernels


@pytest.mark.triton_on_cpu_tensors
def test_max_autotune_picks_a_config_per_kernel_and_matches_eager():
    compiled = minicompiler.compile(softmax_of_cosines, backend="triton", mode="max-autotune")
    for _ in range(2):  # the first call tunes, the second runs the tuned program
        x, w = torch.randn(16, 8), torch.randn(8, 12)
        torch.testing.assert_close(compiled(x, w), softmax_of_cosines(x, w))
    graph = compiled.report.graphs[0]
    tuned = graph.stage("autotune")
    triton_kernels = [k.name for k in graph.kernels if k.kind in ("pointwise", "reduction")]
    assert [note.split(":")[0] for note in tuned.notes] == triton_kernels
    assert all(" tried (default " in note for note in tuned.notes)
    assert "kernel_cos[(" in tuned.text and "XBLOCK=" in tuned.text  # the tuned wrapper's launch lines


def test_candidates_start_with_the_default_and_keep_the_mask_decision():
    for shape in ((64, 32), (10, 100)):  # 2048 elements: no mask; 1000: masked
        [kernel] = kernels_of(shape, "cos")
        candidates = candidate_configs(kernel)
        assert candidates[0] == launch_config(kernel) and len(candidates) > 1
        numel = shape[0] * shape[1]
        assert len({numel % c["BLOCK"] == 0 for c in candidates}) == 1
    [reduction] = kernels_of((3, 5000), "sum")
    assert all(c["XBLOCK"] <= 4 for c in candidate_configs(reduction))  # no more rows per program than rows


@pytest.mark.triton_on_cpu_tensors
def test_tuning_runs_do_not_move_the_random_stream():
    def noisy(x):
        return F.dropout(torch.cos(x), 0.5) + 1

    draws = []
    for mode in ("default", "max-autotune"):
        compiled = minicompiler.compile(noisy, backend="triton", mode=mode)
        torch.manual_seed(0)
        first = compiled(torch.randn(64))
        draws.append((first, torch.rand(4)))
    torch.testing.assert_close(draws[0][0], draws[1][0])
    torch.testing.assert_close(draws[0][1], draws[1][1])


def test_max_autotune_on_the_cpp_backend_says_there_is_nothing_to_tune():
    compiled = minicompiler.compile(softmax_of_cosines, backend="cpp", mode="max-autotune")
    x, w = torch.randn(16, 8), torch.randn(8, 12)
    torch.testing.assert_close(compiled(x, w), softmax_of_cosines(x, w))
    assert any("no launch parameters to tune" in n for n in compiled.report.graphs[0].stage("codegen").notes)


@pytest.mark.triton_on_cpu_tensors
def test_training_tunes_the_forward_and_the_backward_on_their_first_calls():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16))
    compiled = minicompiler.compile(model, backend="triton", mode="max-autotune")
    x = torch.randn(4, 8)
    compiled(x).square().sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).square().sum().backward()
    for g, p in zip(got, model.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad, rtol=1e-3, atol=1e-4)  # other block sizes: other sum orders
    stages = [s.name for s in compiled.report.graphs[0].stages]
    assert "autotune (forward)" in stages and "autotune (backward)" in stages


@pytest.mark.triton_on_cpu_tensors
def test_modes_options_and_disable_follow_torch_compile():
    fn = softmax_of_cosines
    cases = [  # how it is asked -> (CUDA graphs, autotuning)
        ({"mode": "default"}, (False, False)),
        ({"mode": "reduce-overhead"}, (True, False)),
        ({"mode": "max-autotune"}, (True, True)),
        ({"mode": "max-autotune-no-cudagraphs"}, (False, True)),
        ({"options": {"max_autotune": True}}, (False, True)),
        ({"options": {"triton.cudagraphs": True, "max_autotune": False}}, (True, False)),
    ]
    for asked, switches in cases:
        compiled = minicompiler.compile(fn, **asked)
        assert (compiled.cuda_graphs, compiled.autotune) == switches
    compiled = minicompiler.compile(fn, backend="triton", options={"max_autotune": True})
    x, w = torch.randn(16, 8), torch.randn(8, 12)
    torch.testing.assert_close(compiled(x, w), fn(x, w))
    assert compiled.report.graphs[0].stage("autotune").notes
    assert minicompiler.compile(fn, disable=True) is fn
    for bad, message in (({"mode": "fastest"}, "unknown mode"), ({"options": {"freezing": True}}, "freezing"),
                         ({"mode": "max-autotune", "options": {"max_autotune": True}}, "not both")):
        try:
            minicompiler.compile(fn, **bad)
        except ValueError as error:
            assert message in str(error)
        else:
            raise AssertionError(f"{bad} was accepted")


def test_a_short_row_is_swept_one_element_at_a_time_by_wide_blocks():
    """Rows of at most SHORT_ROW elements (a 3x3 pool window): one column per step, XBLOCK rows per
    program, so a thread keeps its rows and the fold crosses no threads. Longer rows keep RBLOCK."""
    [short] = kernels_of((200_000, 9), "sum")
    assert launch_config(short) == {"XBLOCK": 512, "RBLOCK": 1, "num_warps": 4}
    [long] = kernels_of((200_000, 17), "sum")
    assert launch_config(long)["RBLOCK"] == 32


def test_few_rows_are_spread_over_enough_programs():
    """A reduction with few rows takes fewer of them per program, so that there are MANY_PROGRAMS
    programs: down to one row where each row is contiguous, down to 8 where rows lie side by side
    (an outer reduction: 8 float32 are a 32-byte sector), which then sweeps further along them."""
    [inner] = kernels_of((2048, 64), "sum")  # 16 rows a program would make 128 programs
    assert launch_config(inner) == {"XBLOCK": 8, "RBLOCK": 64, "num_warps": 4}
    assert 2048 // launch_config(inner)["XBLOCK"] >= MANY_PROGRAMS
    g = Graph()
    x = g.placeholder("x", TensorMeta((784, 512), torch.float32))
    g.output(g.call("sum", x, (0,), True))  # 512 columns of 784: ResNet-18's last batch norms
    [outer] = fuse(g).kernels
    assert outer.outer_reduction
    assert launch_config(outer) == {"XBLOCK": 8, "RBLOCK": 128, "num_warps": 4}
    [many] = kernels_of((1 << 20, 64), "sum")  # enough rows: blocks as wide as before
    assert launch_config(many)["XBLOCK"] == 16


@pytest.mark.triton_on_cpu_tensors
def test_short_rows_reduce_as_eager_through_triton():
    def pool_and_argmax(x):
        windows = x.unfold(2, 3, 2).unfold(3, 3, 2).flatten(-2)  # 9 elements a row
        return windows.amax(-1), windows.argmax(-1), windows.sum(-1)

    x = torch.randn(2, 6, 9, 9)
    compiled = minicompiler.compile(pool_and_argmax, backend="triton")
    for got, expected in zip(compiled(x), pool_and_argmax(x), strict=True):
        torch.testing.assert_close(got, expected)
    assert "RBLOCK=1," in compiled.report.graphs[0].stage("codegen").text
