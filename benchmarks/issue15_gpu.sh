#!/usr/bin/env bash
# Issue 15 on the H100, in four calls of at most ~9 minutes each; everything lands in $OUT:
#   bash benchmarks/issue15_gpu.sh core       device.txt (GPU, versions, the GPU tests of tests/runtime, the
#                                             addmm epilogue and the pool gradient; the max pool timed);
#                                             bench_cuda_core.* (MiniTransformer with and without its mask,
#                                             ResNet-18 b16 and b1: eager, torch.compile and minicompiler in
#                                             default and reduce-overhead, inference and training step);
#                                             training_cuda.* (seed 003's
#                                             trainer, every compiler); numpy_fn.txt (seed 001, this machine's CPU)
#   bash benchmarks/issue15_gpu.sh models     bench_cuda_models.* (MLP, masked MiniTransformer, ResNet-18 b1, seed
#                                             003's CNN, BERT-base encoder; default; profile)
#   bash benchmarks/issue15_gpu.sh inference  the timm and torchvision families' inference (torch.compile takes
#                                             15-25 s for each first call: five models need ~4 minutes)
#   bash benchmarks/issue15_gpu.sh training   the timm and torchvision families' training steps
#
# Each bench_cuda_X has .txt (the table), .json (device, versions, sizes, every row), .html (the plotly
# chart: python -m minicompiler.bench.chart X.json redraws it) and .log. Every first call is timed with
# empty kernel caches (minicompiler's, Triton's and Inductor's). torch.compile takes 15-60 s to compile
# each family model, so each part has a wall-clock limit (timeout) and a deadline (no new model after
# it); the benchmark rewrites its JSON after every model, and a part cut short keeps what it measured.
set -uo pipefail
out=${OUT:-issue15_out}
mkdir -p "$out"
export PYTHONPATH=$PWD
export MINICOMPILER_PROGRESS=0  # no bars in the logs
start=$(date +%s)
part() { echo "== $1 ($(( $(date +%s) - start )) s since start)"; }
bench() {  # bench TAG TIMEOUT DEADLINE ARGS...: one part's table, JSON, chart and log
  local tag=$1 limit=$2 deadline=$3; shift 3
  timeout "$limit" python -m minicompiler.bench --device cuda --no-kernels --deadline-s "$deadline" "$@" \
      --json "$out/bench_cuda_$tag.json" > "$out/bench_cuda_$tag.txt" 2> "$out/bench_cuda_$tag.log"
}

case "${1:-core}" in
core)
  part device
  { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
    date -u +%Y-%m-%dT%H:%MZ
    timeout 150 python -m pytest -q -p no:cacheprovider tests/runtime tests/replace/test_addmm_relu.py \
        tests/autograd/test_pool_gradient.py 2>&1 | tail -3
    timeout 60 python benchmarks/max_pool_check.py cuda 2>&1 | tail -12  # the gathered pool gradient, timed
  } 2>&1 | tee "$out/device.txt"
  part "core: MiniTransformer (masked too), ResNet-18 b16 and b1 (default, reduce-overhead; inference + training)"
  bench core 330 280 --modes default,reduce-overhead --only "MiniTransformer (seed 003)$" --only "masked" \
      --only "ResNet-18 b16$" --only "ResNet-18 b1$" --repeats 10
  part "seed 003 trainer"
  timeout 60 python -m minicompiler.bench.training --device cuda --epochs 4 --json "$out/training_cuda.json" \
      > "$out/training_cuda.txt" 2>&1
  part "seed 001 numpy_fn (on this machine's CPU)"
  timeout 90 python benchmarks/numpy_fn.py > "$out/numpy_fn.txt" 2>&1
  ;;
models)
  part "models: MLP, masked MiniTransformer, ResNet-18 b1, seed 003 CNN, BERT-base (default; profile)"
  bench models 240 190 --modes default --only "MLP 1024" --only "masked" --only "ResNet-18 b1$" \
      --only "seed 003 CNN" --only "BERT" --profile --repeats 10
  ;;
inference)
  part "timm families (inference)"
  bench timm_inference 260 210 --modes default --tasks inference --only timm --repeats 5
  part "torchvision families (inference)"
  bench torchvision_inference 260 210 --modes default --tasks inference --only torchvision --repeats 5
  ;;
training)
  part "timm families (training)"
  bench timm_training 270 220 --modes default --tasks training --only timm --repeats 5
  part "torchvision families (training)"
  bench torchvision_training 270 220 --modes default --tasks training --only torchvision --repeats 5
  ;;
esac
part done
for f in "$out"/*.txt; do echo "---- $f"; grep -v "^  " "$f" | tail -30; done
