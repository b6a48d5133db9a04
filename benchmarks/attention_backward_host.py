"""Host time of attention in a training step on a GPU: the recorded call and two ways to its gradients.

    python benchmarks/attention_backward_host.py

For MiniTransformer's and BERT-base's attention shapes (float32, with and without a mask): SDPA
without autograd; `recorded_call` (the forward under autograd, ir/recorded_calls.py); the gradients
through `torch.autograd.grad` (the engine: a graph task per call) and from the recorded node called
directly (what `recorded_vjps` does where it can). Best of 5 rounds of 300 calls, host time, then
the wall time of one round with a sync.
Results: benchmarks/results/h100_2026-11-27g/attention_recorded_backward.txt.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from minicompiler.ir.recorded_calls import TAPE, recorded_call


def bench(name: str, fn: Callable[[], object], calls: int = 300) -> None:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    means = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        means.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    print(f"{min(means):8.1f} us host {(time.perf_counter() - start) / calls * 1e6:8.1f} us wall  {name}", flush=True)


def one_case(shape: tuple[int, ...], mask: torch.Tensor | None) -> None:
    print("== shape", shape, "mask", None if mask is None else (tuple(mask.shape), mask.dtype))
    q, k, v = (torch.randn(shape, device="cuda") for _ in range(3))
    args = (q, k, v, mask, 0.0, False)
    sdpa = F.scaled_dot_product_attention
    bench("sdpa, no autograd", lambda: sdpa(*args, scale=0.125))
    token = TAPE.set({})
    try:
        bench("recorded_call", lambda: recorded_call("a", (0, 1, 2), sdpa, *args, scale=0.125))
        recorded, leaves = TAPE.get()["a"]
        grad = torch.randn_like(recorded)
        wanted = [leaves[0], leaves[1], leaves[2]]
        engine = torch.autograd.grad
        bench("gradients by torch.autograd.grad", lambda: engine(recorded, wanted, grad, retain_graph=True))
        node = recorded.grad_fn
        bench(f"gradients by the node itself ({type(node).__name__})", lambda: node(grad))
    finally:
        TAPE.reset(token)


def main() -> None:
    causal = torch.tril(torch.ones(128, 128, device="cuda")).view(1, 1, 128, 128) > 0
    padding = torch.zeros(8, 1, 1, 128, device="cuda")  # BERT's additive mask
    for shape, mask in (((8, 8, 128, 64), None), ((8, 8, 128, 64), causal), ((8, 12, 128, 64), padding)):
        one_case(shape, mask)


if __name__ == "__main__":
    main()
