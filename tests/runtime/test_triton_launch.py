"""FastLauncher on a real GPU: launching compiled kernels directly gives Triton's results, for
aligned and misaligned pointers and for shape-generic kernels. (CI has no GPU: these run on the
lent H100, without TRITON_INTERPRET, or under `-p tests.triton_on_gpu`; benchmarks/device_run.sh runs
them.) And the launcher code whose C function is called directly is recognized exactly (on the CPU too)."""

import importlib.util
import os

import pytest
import torch

from minicompiler.codegen import generate
from minicompiler.fuse import fuse
from minicompiler.ir import Graph, TensorMeta


@pytest.fixture
def compiled_triton_on_a_gpu() -> None:
    # asked when each test runs, not at collection: the GPU plugin (tests/triton_on_gpu.py) sets
    # TRITON_INTERPRET=1 while it collects and turns it off before the tests run
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a CUDA GPU and compiled (not interpreted) Triton")


def module_for(shape, dynamic=False):
    g = Graph()
    x = g.placeholder("x", TensorMeta(shape, torch.float32, device=torch.device("cuda")))
    y = g.placeholder("y", TensorMeta(shape, torch.float32, device=torch.device("cuda")))
    g.output(g.call("add", g.call("cos", x), g.call("sum", y, (len(shape) - 1,), True)))
    return generate(fuse(g), "triton", dynamic=dynamic)


@pytest.mark.usefixtures("compiled_triton_on_a_gpu")
def test_direct_launches_match_eager_for_aligned_and_misaligned_inputs():
    module = module_for((64, 33))
    storage = torch.randn(64 * 33 + 1, device="cuda")
    for offset in (0, 1, 0, 1, 0):  # offset 1: a pointer 4 bytes past an aligned one
        x = storage[offset : offset + 64 * 33].view(64, 33)
        y = torch.randn(64, 33, device="cuda")
        torch.testing.assert_close(module([x, y]), torch.cos(x) + y.sum(1, keepdim=True))
    [launcher] = [v for k, v in module._call.__globals__.items() if k.startswith("kernel_")]
    assert len(launcher.compiled) == 2  # one compiled variant per alignment, each launched directly


@pytest.mark.usefixtures("compiled_triton_on_a_gpu")
def test_direct_launches_of_a_shape_generic_kernel():
    module = module_for((8, 16), dynamic=True)
    for rows, cols in ((8, 16), (100, 7), (3, 1000)):
        x, y = torch.randn(rows, cols, device="cuda"), torch.randn(rows, cols, device="cuda")
        torch.testing.assert_close(module([x, y]), torch.cos(x) + y.sum(1, keepdim=True))


# Triton 3.6's CudaLauncher.__call__, the code FastLauncher replaces by a direct call of its C function
KNOWN_CALL = '''
    def __call__(self, gridX, gridY, gridZ, stream, function, *args):

        def allocate_scratch(size, align, allocator):
            if size > 0:
                grid_size = gridX * gridY * gridZ
                alloc_size = grid_size * self.num_ctas * size
                alloc_fn = allocator.get()
                return alloc_fn(alloc_size, align, stream)
            return None

        global_scratch = allocate_scratch(self.global_scratch_size, self.global_scratch_align, _allocation._allocator)
        profile_scratch = allocate_scratch(self.profile_scratch_size, self.profile_scratch_align,
                                           _allocation._profile_allocator)
        self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl,
                    global_scratch, profile_scratch, *args)
'''


def _launcher_class(tmp_path, name, call_source):
    path = tmp_path / f"{name}.py"
    path.write_text(f"class CudaLauncher:\n{call_source}")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CudaLauncher


def test_the_c_launch_is_called_directly_only_for_the_launcher_code_known(tmp_path):
    from minicompiler.runtime.triton_launch import _direct_launch

    assert _direct_launch(_launcher_class(tmp_path, "known", KNOWN_CALL))
    reordered = KNOWN_CALL.replace("global_scratch, profile_scratch, *args)", "profile_scratch, global_scratch, *args)")
    assert not _direct_launch(_launcher_class(tmp_path, "reordered", reordered))
    more = KNOWN_CALL.replace("function, *args):", "function, kernel_metadata, *args):")  # another version's
    assert not _direct_launch(_launcher_class(tmp_path, "more", more))
    assert not _direct_launch(type("NoSource", (), {"__call__": lambda self: None}))
