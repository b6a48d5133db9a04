"""The generated wrapper: the buffers it allocates."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_cpu_buffers_are_allocated_on_the_cpu_whatever_the_default_device() -> None:
    """A user's torch.set_default_device("cuda") (here "meta", which a CPU machine has) must not
    give a C++ kernel memory of another device to write into: the wrapper names the device of
    every buffer it allocates. Run in a child process: before, the kernel crashed it (SIGSEGV)."""
    script = textwrap.dedent("""
        import torch, minicompiler
        fn = lambda x: (x.sin() + 1).sum(0)
        compiled = minicompiler.compile(fn, backend="cpp")
        x = torch.randn(8, 4)
        torch.set_default_device("meta")
        out = compiled(x)
        torch.set_default_device(None)
        assert out.device.type == "cpu", out.device
        torch.testing.assert_close(out, fn(x))
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])
