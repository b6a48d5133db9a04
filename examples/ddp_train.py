"""Seed 003's models trained under DistributedDataParallel, compiled with minicompiler (issue 17).

    torchrun --nproc_per_node=2 examples/ddp_train.py --backend gloo --device cpu --small
    NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node=2 examples/ddp_train.py --backend nccl --device cuda

Nothing here is home-made distribution: torch.distributed moves the gradients (DDP's buckets,
all-reduced as the backward produces them); minicompiler only compiles the model's forward and
backward. Two orders, as torch.compile users write them:

    DDP(minicompiler.compile(model))     compile, then wrap
    minicompiler.compile(DDP(model))     wrap, then compile (DDP's forward runs as is, the model inside compiled)

1. Gradient check: after one step, every parameter's gradient equals the one process computes
   alone for the same global batch (the mean over the ranks' shards: batch norm normalizes each
   shard by its own statistics, in DDP as in this reference).
2. Time per step, eager DDP vs torch.compile + DDP vs minicompiler + DDP, printed by rank 0 as a
   table (--json PATH writes it), with the time one all-reduce of all gradients takes (see allreduce_ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import minicompiler
from minicompiler.bench.models import MiniTransformer, SimpleModel

# (model, input maker) per name; `small` sizes keep the CPU test in CI short
SIZES = {
    "cnn": {"small": dict(width=4, image=8), "full": dict(width=64, image=32)},
    "transformer": {"small": dict(vocab_size=64, d_model=32, num_heads=4, num_layers=2, d_ff=64, max_seq_len=16),
                    "full": dict(vocab_size=1000, d_model=256, num_heads=8, num_layers=4, d_ff=1024,
                                 max_seq_len=128)},
}


def make_model(name: str, size: str) -> nn.Module:
    torch.manual_seed(0)  # every rank and the reference start from the same weights
    if name == "cnn":
        return SimpleModel(**SIZES[name][size])
    return MiniTransformer(**SIZES[name][size], dropout=0.0)  # no dropout: a gradient check needs determinism


def make_batch(name: str, size: str, batch: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of a step: the same on every rank (each takes its shard)."""
    generator = torch.Generator().manual_seed(1000 + step)
    if name == "cnn":
        image = SIZES[name][size]["image"]
        x = torch.randn(batch, 3, image, image, generator=generator)
    else:
        config = SIZES[name][size]
        x = torch.randint(0, config["vocab_size"], (batch, config["max_seq_len"]), generator=generator)
    return x, torch.randint(0, 10, (batch,), generator=generator)


def shard(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.chunk(dist.get_world_size())[dist.get_rank()]


def wrappers() -> dict[str, Callable[[nn.Module, torch.device], nn.Module]]:
    """Each way of putting a model on DDP, by the name the table prints."""
    def ids(device: torch.device) -> list[int] | None:
        return [device.index] if device.type == "cuda" else None

    return {
        "eager DDP": lambda m, d: DDP(m, device_ids=ids(d)),
        "torch.compile + DDP": lambda m, d: torch.compile(DDP(m, device_ids=ids(d))),
        "minicompiler, then DDP": lambda m, d: DDP(minicompiler.compile(m), device_ids=ids(d)),
        "DDP, then minicompiler": lambda m, d: minicompiler.compile(DDP(m, device_ids=ids(d))),
    }


def reference_gradients(name: str, size: str, batch: int, device: torch.device) -> list[torch.Tensor]:
    """One process, no DDP: the mean over the world's shards of each shard's loss."""
    model = make_model(name, size).to(device)
    x, y = (t.to(device) for t in make_batch(name, size, batch, 0))
    world = dist.get_world_size()
    loss = sum(nn.functional.cross_entropy(model(xs), ys) for xs, ys in zip(x.chunk(world), y.chunk(world),
                                                                               strict=True)) / world
    loss.backward()
    return [p.grad for p in model.parameters()]


def check_gradients(name: str, size: str, batch: int, device: torch.device, order: str) -> float:
    """Largest |DDP gradient - one-process gradient| after one step; raises if they differ."""
    model = make_model(name, size).to(device)
    wrapped = wrappers()[order](model, device)
    x, y = (shard(t).to(device) for t in make_batch(name, size, batch, 0))
    nn.functional.cross_entropy(wrapped(x), y).backward()
    compiled = next((m for m in (wrapped, getattr(wrapped, "module", None))
                     if isinstance(m, minicompiler.CompiledModule)), None)
    if compiled is not None and (not compiled.reports or any(r.eager_fallback for r in compiled.reports)):
        raise RuntimeError(f"{order}: the model ran eagerly, not compiled: {compiled.report}")
    expected = reference_gradients(name, size, batch, device)
    worst = 0.0
    for p, e in zip(model.parameters(), expected, strict=True):
        torch.testing.assert_close(p.grad, e, rtol=1e-4, atol=1e-5)
        worst = max(worst, (p.grad - e).abs().max().item())
    return worst


def time_steps(name: str, size: str, batch: int, device: torch.device, order: str, steps: int) -> float:
    """Median seconds per training step (forward, backward with DDP's all-reduce, SGD step) after warm-up."""
    model = make_model(name, size).to(device)
    wrapped = wrappers()[order](model, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    for step in range(steps):
        x, y = (shard(t).to(device) for t in make_batch(name, size, batch, step % 4))
        start = time.perf_counter()
        optimizer.zero_grad()
        nn.functional.cross_entropy(wrapped(x), y).backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    warm = times[min(5, steps // 2):]  # the first steps compile
    return statistics.median(warm)


def allreduce_ms(name: str, size: str, device: torch.device, repeats: int = 50) -> float:
    """Median time to all-reduce all of a model's gradients as one flat buffer: the most that
    overlapping communication with the backward could hide. A minicompiler backward is one
    autograd node, so every gradient is ready at its end and DDP's buckets all go then; torch.compile's
    DDP optimizer instead splits the graph at bucket boundaries so that early buckets travel while
    the rest of the backward runs. This number says what that could win here."""
    flat = torch.zeros(sum(p.numel() for p in make_model(name, size).parameters()), device=device)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        dist.all_reduce(flat)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times[repeats // 5:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo", help="torch.distributed backend")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cuda: GPU number LOCAL_RANK")
    parser.add_argument("--models", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--orders", nargs="+", choices=list(wrappers()), default=list(wrappers()))
    parser.add_argument("--small", action="store_true", help="small models (the CPU test)")
    parser.add_argument("--batch", type=int, default=None, help="global batch (default 8 small, 64 full)")
    parser.add_argument("--steps", type=int, default=200, help="timed steps per model and order (0: check only)")
    parser.add_argument("--json", help="rank 0 writes the table here")
    args = parser.parse_args(argv)
    size, batch = ("small", args.batch or 8) if args.small else ("full", args.batch or 64)

    dist.init_process_group(args.backend)
    rank = dist.get_rank()
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    rows = []
    try:
        for name in args.models:
            if args.steps:
                rows.append({"model": name, "order": "all-reduce of all gradients", "step_ms": allreduce_ms(
                    name, size, device)})
            for order in args.orders:
                row = {"model": name, "order": order, "world": dist.get_world_size(), "global_batch": batch}
                if order != "torch.compile + DDP":  # ours are checked; torch's is the yardstick
                    row["max_grad_diff"] = check_gradients(name, size, batch, device, order)
                if args.steps:
                    row["step_ms"] = 1000 * time_steps(name, size, batch, device, order, args.steps)
                rows.append(row)
                if rank == 0:
                    print(json.dumps(row), flush=True)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        print_table(rows, device)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"device": str(device), "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


def print_table(rows: list[dict], device: torch.device) -> None:
    print(f"\n{'model':12} {'order':28} {'grad check':>12} {'ms/step':>9}   ({device}, torch {torch.__version__})")
    for row in rows:
        check = f"{row['max_grad_diff']:.1e}" if "max_grad_diff" in row else "-"
        step = f"{row['step_ms']:9.2f}" if "step_ms" in row else f"{'-':>9}"
        print(f"{row['model']:12} {row['order']:28} {check:>12} {step}")


if __name__ == "__main__":
    sys.exit(main())
