"""`minicompiler.compile(module)` is a module (torch.compile's OptimizedModule conventions), compared with eager."""

import io

import pytest
import torch
from torch import nn

import minicompiler
from minicompiler.compiled_module import CompiledModule


def make_model(dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 4))


def test_a_function_gets_a_function_wrapper_and_a_module_a_module():
    assert isinstance(minicompiler.compile(torch.cos), minicompiler.CompiledFunction)
    model = make_model()
    compiled = minicompiler.compile(model)
    assert isinstance(compiled, nn.Module) and compiled._orig_mod is model
    assert isinstance(minicompiler.compile(backend="cpp")(model), CompiledModule)


def test_parameters_buffers_modules_and_attributes_are_the_originals():
    model = make_model()
    compiled = minicompiler.compile(model)
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in model.parameters()]
    assert [n for n, _ in compiled.named_parameters()] == [f"_orig_mod.{n}" for n, _ in model.named_parameters()]
    assert [id(b) for b in compiled.buffers()] == [id(b) for b in model.buffers()]
    assert list(compiled.modules())[1:] == list(model.modules())
    model.extra = "read through"
    assert compiled.extra == "read through" and len(compiled) == len(model)
    compiled(torch.randn(4, 8))
    assert compiled.fn.__self__ is model and compiled.cache and compiled.report is compiled.reports[-1]


def test_truth_and_length_are_the_originals():
    """`if model:` works on any compiled module (a module without a length is true), and a
    container's length and truth are its own."""
    assert bool(minicompiler.compile(nn.Linear(2, 2)))
    assert len(minicompiler.compile(make_model())) == 5
    assert not minicompiler.compile(nn.Sequential())


def test_train_and_eval_switch_the_original_and_the_compiled_code_follows():
    model, eager = make_model(), make_model()
    compiled = minicompiler.compile(model)
    x = torch.randn(6, 8)
    for mode in ("train", "eval", "train"):
        getattr(compiled, mode)()
        getattr(eager, mode)()
        assert model.training == eager.training == compiled.training
        torch.testing.assert_close(compiled(x), eager(x), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(model[1].running_mean, eager[1].running_mean)  # batch norm's statistics
    assert len(compiled.reports) == 2  # one graph per mode; the third call finds the training graph again
    assert "training" in compiled.reports[1].recompile_reason


def test_dropout_drops_in_training_and_not_in_eval():
    dropout = nn.Dropout(0.5)
    compiled = minicompiler.compile(dropout)
    x = torch.rand(64, 64) + 1.0
    out = compiled(x)
    kept = out != 0
    assert 0.3 < kept.float().mean() < 0.7
    torch.testing.assert_close(out[kept], x[kept] * 2.0)
    compiled.eval()
    torch.testing.assert_close(compiled(x), x)


def test_state_dict_is_interchangeable_with_the_originals_and_both_forms_load():
    model = make_model()
    compiled = minicompiler.compile(model)
    compiled(torch.randn(4, 8))  # running statistics moved
    assert list(compiled.state_dict()) == list(model.state_dict())
    buffer = io.BytesIO()
    torch.save(compiled.state_dict(), buffer)
    buffer.seek(0)
    plain = make_model()
    with torch.no_grad():
        plain[0].weight.add_(1.0)
    plain.load_state_dict(torch.load(buffer, weights_only=True))
    for key, value in model.state_dict().items():
        torch.testing.assert_close(plain.state_dict()[key], value)
    other = minicompiler.compile(make_model())
    other.load_state_dict({f"_orig_mod.{k}": v for k, v in model.state_dict().items()})  # torch.compile's form
    other.load_state_dict(model.state_dict())  # the plain form
    x = torch.randn(4, 8)
    other.eval(), model.eval()
    torch.testing.assert_close(other(x), model(x))
    with pytest.raises(RuntimeError, match="Unexpected"):
        other.load_state_dict({**model.state_dict(), "nonsense": torch.zeros(1)})


def test_to_changes_the_originals_dtype_and_recompiles():
    model = make_model().eval()
    compiled = minicompiler.compile(model)
    compiled(torch.randn(4, 8))
    assert compiled.to(torch.float64) is compiled
    assert model[0].weight.dtype == torch.float64
    x = torch.randn(4, 8, dtype=torch.float64)
    out = compiled(x)
    assert out.dtype == torch.float64 and len(compiled.reports) == 2
    torch.testing.assert_close(out, model(x))
    assert compiled.half() is compiled and model[0].weight.dtype == torch.float16
    x = torch.randn(4, 8, dtype=torch.float16)
    torch.testing.assert_close(compiled(x), model(x))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_moves_the_original():
    model = make_model().eval()
    compiled = minicompiler.compile(model).cuda()
    assert model[0].weight.is_cuda
    x = torch.randn(4, 8, device="cuda")
    torch.testing.assert_close(compiled(x), model(x))


def test_hooks_on_the_original_run():
    model = make_model().eval()
    compiled = minicompiler.compile(model)
    model.register_forward_pre_hook(lambda module, args: (args[0] * 2,))
    model.register_forward_hook(lambda module, args, output: output + 1)
    x = torch.randn(4, 8)
    torch.testing.assert_close(compiled(x), model(x))
    torch.testing.assert_close(compiled(x), model[1:](model[0](x * 2)) + 1)


def test_training_through_the_compiled_module_matches_eager():
    model, eager = make_model(), make_model()
    compiled = minicompiler.compile(model)
    opt, eager_opt = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (compiled, eager))
    for _ in range(3):
        x = torch.randn(8, 8)
        for m, o in ((compiled, opt), (eager, eager_opt)):
            o.zero_grad()
            m(x).square().mean().backward()
            o.step()
    for p, q in zip(model.parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
