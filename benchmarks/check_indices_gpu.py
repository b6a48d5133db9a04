"""What checking user-given indices costs on the GPU: `check_indices` (minicompiler/ir/gather.py)
runs before every gather or scatter at indices a user gives (an embedding's token ids, say), so that
an index out of range raises as eager does instead of reading or writing out of bounds.

    python benchmarks/check_indices_gpu.py

Prints the time of one check (median of 200 batches of 50 calls, synchronized), the kernels it
launches, how many checks a BERT-base encoder's compiled graph makes (built from a config, random
weights), and that graph's time per call, so the share is plain."""

from __future__ import annotations

import statistics
import time

import torch

import minicompiler
from minicompiler.ir.gather import check_indices


def per_call_ms(fn, calls: int = 50, batches: int = 200) -> float:
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / calls * 1e3)
    return statistics.median(times)


def main() -> None:
    from transformers import BertConfig, BertModel

    print(torch.cuda.get_device_name(), "| torch", torch.__version__)
    ids = torch.randint(0, 30522, (8, 128), device="cuda")
    check_ms = per_call_ms(lambda: check_indices(ids, 0, 30522))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        check_indices(ids, 0, 30522)
        torch.cuda.synchronize()
    launches = sum(e.count for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA)
    print(f"check_indices on 8x128 int64 ids: {check_ms * 1e3:.1f} us per call, {launches} kernels")

    model = BertModel(BertConfig()).cuda().eval()
    compiled = minicompiler.compile(model)
    mask = torch.ones(8, 128, dtype=torch.long, device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(compiled(ids, attention_mask=mask).last_hidden_state,
                                   model(ids, attention_mask=mask).last_hidden_state, rtol=1e-3, atol=1e-3)
        bert_ms = per_call_ms(lambda: compiled(ids, attention_mask=mask), calls=10, batches=20)
    checks = sum(1 for g in compiled.report.graphs for line in g.stage("codegen").text.splitlines()
                 if "ops.check_indices(" in line)
    print(f"BERT-base 8x128, minicompiler default: {bert_ms:.3f} ms per call; {checks} index checks in its "
          f"graph, about {checks * check_ms / bert_ms * 100:.1f}% of the call")


if __name__ == "__main__":
    main()
