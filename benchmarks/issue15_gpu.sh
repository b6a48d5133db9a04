#!/usr/bin/env bash
# Issue 15 on the H100, in one call of at most ~9 minutes; everything lands in $OUT:
#   bash benchmarks/issue15_gpu.sh            (OUT=... set by the device tool; else ./issue15_out)
#
#   device.txt            GPU, driver, Python/torch/triton versions; tests/runtime (guards, CUDA graphs) on CUDA
#   bench_cuda_core.*     MiniTransformer and ResNet-18 b16 (the reduce-overhead targets): eager, torch.compile
#                         and minicompiler in default and reduce-overhead; inference and training step; profile
#   bench_cuda_models.*   MLP, masked MiniTransformer, ResNet-18 b1, seed 003's CNN, BERT-base encoder:
#                         default mode; inference and training step; profile
#   bench_cuda_families.* timm families (ResNet-50, EfficientNet-B0, ConvNeXt-T, MobileNetV3, ViT-B/16), default
#                         mode, inference (as many as fit: torch.compile takes ~20-60 s to compile each)
#   bench_cuda_autotune.* minicompiler max-autotune on MiniTransformer (inference; torch.compile's max-autotune
#                         takes minutes to compile, more than this call has left)
#   training_cuda.*       seed 003's trainer (20 batches of 32), every compiler
#   *.html                the plotly pages (python -m minicompiler.bench.chart X.json redraws one)
#
# The parts run in the order of the issue's targets. torch.compile's compile times do not let one
# 9-minute call cover every model x mode x task: what a deadline cut off is listed as skipped in
# its table, and `bash benchmarks/issue15_gpu.sh rest` measures the torchvision families and the
# timm training steps in a second call.
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

if [ "${1:-}" = rest ]; then
  part "torchvision families + timm training (default)"
  timeout 300 python -m minicompiler.bench --device cuda --no-kernels --modes default --only torchvision \
      --repeats 5 --deadline-s 220 --json "$out/bench_cuda_torchvision.json" \
      > "$out/bench_cuda_torchvision.txt" 2> "$out/bench_cuda_torchvision.log"
  timeout 200 python -m minicompiler.bench --device cuda --no-kernels --modes default --tasks training --only timm \
      --repeats 5 --deadline-s 140 --json "$out/bench_cuda_timm_training.json" \
      > "$out/bench_cuda_timm_training.txt" 2> "$out/bench_cuda_timm_training.log"
  exit 0
fi

part device
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
  date -u +%Y-%m-%dT%H:%MZ
  timeout 30 python -m pytest -q -p no:cacheprovider tests/runtime/test_guard_code.py tests/runtime/test_cuda_graphs.py \
      2>&1 | tail -3
} 2>&1 | tee "$out/device.txt"

part "core: MiniTransformer, ResNet-18 b16 (default, reduce-overhead; inference + training; profile)"
timeout 190 python -m minicompiler.bench --device cuda --no-kernels --modes default,reduce-overhead \
    --only "MiniTransformer (seed 003)$" --only "ResNet-18 b16$" --profile --repeats 10 --deadline-s 140 \
    --json "$out/bench_cuda_core.json" > "$out/bench_cuda_core.txt" 2> "$out/bench_cuda_core.log"

part "models: MLP, masked MiniTransformer, ResNet-18 b1, seed 003 CNN, BERT-base (default; profile)"
timeout 160 python -m minicompiler.bench --device cuda --no-kernels --modes default \
    --only "MLP 1024" --only "masked" --only "ResNet-18 b1$" --only "seed 003 CNN" --only "BERT" \
    --profile --repeats 10 --deadline-s 110 --json "$out/bench_cuda_models.json" \
    > "$out/bench_cuda_models.txt" 2> "$out/bench_cuda_models.log"

part "timm families (default; inference)"
timeout 75 python -m minicompiler.bench --device cuda --no-kernels --modes default --tasks inference --only timm \
    --repeats 5 --deadline-s 45 --json "$out/bench_cuda_families.json" \
    > "$out/bench_cuda_families.txt" 2> "$out/bench_cuda_families.log"

part "seed 003 trainer"
timeout 40 python -m minicompiler.bench.training --device cuda --epochs 4 --json "$out/training_cuda.json" \
    > "$out/training_cuda.txt" 2>&1

part "max-autotune (MiniTransformer; inference)"
timeout 30 python -m minicompiler.bench --device cuda --no-kernels --modes max-autotune --tasks inference \
    --no-torch-compile \
    --only "MiniTransformer (seed 003)$" --repeats 5 --json "$out/bench_cuda_autotune.json" \
    > "$out/bench_cuda_autotune.txt" 2> "$out/bench_cuda_autotune.log"

part done
for f in "$out"/*.txt; do echo "---- $f"; grep -v "^  " "$f" | tail -30; done
