#!/usr/bin/env bash
# Issue 15 on the H100, in one call of at most ~9 minutes; everything lands in $OUT:
#   bash benchmarks/issue15_gpu.sh            (OUT=... set by the device tool; else ./issue15_out)
#
#   device.txt               GPU, driver, Python/torch/triton versions; tests/runtime on CUDA
#   bench_cuda_models.*      seeds' models + BERT-base: eager, torch.compile and minicompiler in
#                            default and reduce-overhead, inference and training step, --profile
#   bench_cuda_families.*    timm/torchvision families (ResNet-50, EfficientNet, ConvNeXt,
#                            MobileNet, ViT), default mode, inference and training step
#   bench_cuda_autotune.*    max-autotune on MiniTransformer and ResNet-18 b16 (inference)
#   training_cuda.*          seed 003's trainer (20 batches of 32), every compiler
#
# Each part has its own wall-clock limit (timeout) and deadline (no new model after it), and the
# benchmark rewrites its JSON/HTML after every model, so a part cut short keeps what it measured.
set -uo pipefail
out=${OUT:-issue15_out}
mkdir -p "$out"
export PYTHONPATH=$PWD
export MINICOMPILER_PROGRESS=0  # no bars in the logs
start=$(date +%s)
part() { echo "== $1 ($(( $(date +%s) - start )) s since start)"; }

part device
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
  date -u +%Y-%m-%dT%H:%MZ
  timeout 45 python -m pytest -q -p no:cacheprovider tests/runtime/test_guard_code.py tests/runtime/test_cuda_graphs.py \
      tests/runtime/test_triton_launch.py 2>&1 | tail -3
} 2>&1 | tee "$out/device.txt"

part "seeds' models + BERT-base (default, reduce-overhead; inference + training; profile)"
timeout 250 python -m minicompiler.bench --device cuda --no-kernels --modes default,reduce-overhead \
    --only "MLP 1024" --only "MiniTransformer" --only "ResNet-18" --only "seed 003 CNN" --only "BERT" \
    --profile --repeats 10 --deadline-s 190 --json "$out/bench_cuda_models.json" \
    > "$out/bench_cuda_models.txt" 2> "$out/bench_cuda_models.log"

part "timm / torchvision families (default; inference + training)"
timeout 130 python -m minicompiler.bench --device cuda --no-kernels --modes default --only timm --only torchvision \
    --repeats 5 --deadline-s 90 --json "$out/bench_cuda_families.json" \
    > "$out/bench_cuda_families.txt" 2> "$out/bench_cuda_families.log"

part "max-autotune (MiniTransformer, ResNet-18 b16; inference)"
timeout 50 python -m minicompiler.bench --device cuda --no-kernels --modes max-autotune --tasks inference \
    --only "MiniTransformer (seed" --only "ResNet-18 b16" --repeats 5 --deadline-s 25 \
    --json "$out/bench_cuda_autotune.json" > "$out/bench_cuda_autotune.txt" 2> "$out/bench_cuda_autotune.log"

part "seed 003 trainer"
timeout 45 python -m minicompiler.bench.training --device cuda --epochs 5 --json "$out/training_cuda.json" \
    > "$out/training_cuda.txt" 2>&1

part done
for f in "$out"/*.txt; do echo "---- $f"; tail -40 "$f"; done
