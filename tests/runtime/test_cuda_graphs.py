"""CUDAGraphRunner on a real GPU (mode="reduce-overhead"): replays give the program's results for
new inputs, borrowed inputs that move are noticed, lent outputs keep their values when they are
still held at the next replay, a backward graph reads a forward's lent outputs in place, and an
input the program changes in place changes once per call.
(CI has no GPU: these run on the lent H100; benchmarks/device_run.sh runs them.)"""

import copy

import pytest
import torch

import minicompiler
from minicompiler.runtime.cuda_graphs import CUDAGraphRunner

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def forward_program(inputs):
    (x,) = inputs
    return x * 2, torch.cos(x)  # an output, and a tensor "saved for the backward"


def backward_program(inputs):
    saved, grad = inputs
    return (grad * saved,)


def test_replays_match_the_program_for_new_inputs_and_outputs_survive_later_replays():
    runner = CUDAGraphRunner(forward_program)
    xs = [torch.randn(1000, device="cuda") for _ in range(4)]
    outs = [runner([x]) for x in xs]
    assert runner.graph is not None and runner.borrowed == [False]
    for x, (doubled, cos) in zip(xs, outs, strict=True):
        torch.testing.assert_close(doubled, x * 2)
        torch.testing.assert_close(cos, torch.cos(x))


def test_a_lent_output_still_held_at_the_next_replay_gets_its_own_copy():
    runner = CUDAGraphRunner(forward_program, lend_last=1)
    xs = [torch.randn(1000, device="cuda") for _ in range(4)]
    held = [runner([x])[1] for x in xs]  # all four kept alive across the replays
    for x, cos in zip(xs, held, strict=True):
        torch.testing.assert_close(cos, torch.cos(x))
    static_address = runner.static_outputs[1].data_ptr()
    assert held[-1].data_ptr() == static_address  # the last one is still the graph's memory
    assert all(cos.data_ptr() != static_address for cos in held[:-1])


def test_a_backward_graph_reads_lent_outputs_in_place():
    forward = CUDAGraphRunner(forward_program, lend_last=1)
    backward = CUDAGraphRunner(backward_program)
    for _ in range(4):
        x, grad = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
        _, saved = forward([x])
        (result,) = backward([saved, grad])
        del saved  # as autograd drops saved tensors after the backward
        torch.testing.assert_close(result, grad * torch.cos(x))
    assert backward.borrowed == [True, False]  # the lent tensor read in place, the gradient copied
    assert forward.lent == [] or forward.lent[0][1]() is None  # (its id, a weak reference to it)


def counting_program(inputs):
    x, count = inputs
    count.add_(1)  # changed in place, as a kernel writes a BatchNorm's running statistics
    return x + count, count


def test_an_input_changed_in_place_changes_once_per_call_across_warm_ups_and_recordings():
    runner = CUDAGraphRunner(counting_program, lend_last=1, written=[1])
    count = torch.zeros(8, device="cuda")  # the same tensor every call: borrowed, written by the graph
    for calls in range(1, 6):
        x = torch.randn(8, device="cuda")
        total, new_count = runner([x, count])
        assert new_count is count  # handed back as the input itself: nothing to copy back
        torch.testing.assert_close(count, torch.full((8,), float(calls), device="cuda"))
        torch.testing.assert_close(total, x + calls)
    assert runner.recordings == 1 and runner.borrowed == [False, True]


def test_an_input_changed_in_place_but_copied_in_comes_back_as_its_new_value():
    runner = CUDAGraphRunner(counting_program, lend_last=1, written=[1])
    for _ in range(4):
        count = torch.randn(8, device="cuda")  # a new tensor each call: copied into the graph's own
        before = count.clone()
        _, new_count = runner([torch.randn(8, device="cuda"), count])
        torch.testing.assert_close(new_count, before + 1)  # the caller copies it into `count`
    assert runner.graph is not None and runner.borrowed == [False, False]


def test_a_moved_parameter_is_noticed():
    weight = torch.nn.Parameter(torch.randn(1000, device="cuda"))
    runner = CUDAGraphRunner(lambda inputs: (inputs[0] * inputs[1],))
    x = torch.randn(1000, device="cuda")
    for _ in range(3):
        torch.testing.assert_close(runner([x, weight])[0], x * weight)
    assert runner.borrowed == [True, True]
    weight.data = torch.randn(1000, device="cuda")  # new memory: the graph must not read the old
    torch.testing.assert_close(runner([x, weight])[0], x * weight)
    assert runner.recordings == 2


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(64, 64)
        self.norm = torch.nn.LayerNorm(64)

    def forward(self, x):
        return self.norm(torch.nn.functional.gelu(self.linear(x)))


def _grads(model):
    return [p.grad.clone() for p in model.parameters()]


def _step(net, model, x):
    model.zero_grad()
    net(x).square().mean().backward()
    return _grads(model)


@pytest.fixture
def models():
    model = Block().cuda()
    return copy.deepcopy(model), minicompiler.compile(model, mode="reduce-overhead"), model


def test_training_steps_match_eager(models):
    reference, compiled, model = models
    for _ in range(5):
        x = torch.randn(32, 64, device="cuda")
        for mine, theirs in zip(_step(compiled, model, x), _step(reference, reference, x), strict=True):
            torch.testing.assert_close(mine, theirs, rtol=1e-3, atol=1e-5)


def test_gradients_accumulated_over_steps_match_eager(models):
    reference, compiled, model = models
    model.zero_grad()
    reference.zero_grad()
    for _ in range(4):  # no zero_grad between the steps: each backward adds to the gradients held
        x = torch.randn(32, 64, device="cuda")
        compiled(x).square().mean().backward()
        reference(x).square().mean().backward()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-5)


def test_two_forwards_before_their_backwards_match_eager(models):
    reference, compiled, model = models
    for _ in range(4):
        xs = [torch.randn(32, 64, device="cuda") for _ in range(2)]
        model.zero_grad()
        reference.zero_grad()
        losses = [compiled(x).square().mean() for x in xs]  # the second forward replays over the first
        for loss in reversed(losses):
            loss.backward()
        sum(reference(x).square().mean() for x in xs).backward()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-5)


def test_backward_twice_with_retain_graph_matches_eager(models):
    reference, compiled, model = models
    for _ in range(4):
        x = torch.randn(32, 64, device="cuda")
        for net, module in ((compiled, model), (reference, reference)):
            module.zero_grad()
            loss = net(x).square().mean()
            loss.backward(retain_graph=True)
            net(torch.randn(32, 64, device="cuda"))  # a forward in between replays the graph again
            loss.backward()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-5)


def test_batchnorm_running_statistics_written_back_from_lent_outputs_match_eager():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).cuda()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model, mode="reduce-overhead")
    for step in range(8):  # each program: a plain call, a recording, replays
        x = torch.randn(4, 3, 10, 10, device="cuda")
        with torch.set_grad_enabled(step % 2 == 0):  # the training program, then the inference one
            torch.testing.assert_close(compiled(x), reference(x), rtol=1e-3, atol=1e-4)
        for mine, theirs in zip(model[1].buffers(), reference[1].buffers(), strict=True):
            torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
