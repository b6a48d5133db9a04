#!/usr/bin/env bash
# Everything measured on the lent GPU machine, in one call (device time is scarce):
#   bash benchmarks/device_run.sh OUT_DIR
# GPU correctness (Triton on a real GPU, direct launches, CUDA graphs, tuning), the seeds' benchmark,
# the seed 003 training experiment, the bandwidth bar measured again, and a profile of a training step.
set -uo pipefail
out=${1:?output folder}
export PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
python -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" | tee -a "$out/device.txt"
python -m pytest -q -p no:cacheprovider tests/runtime 2>&1 | tail -3 | tee -a "$out/device.txt"  # 8 files at most come back
python benchmarks/gpu_check.py 2>&1 | tee "$out/gpu_check.txt"
python -m minicompiler.bench --device cuda --json "$out/bench_cuda.json" 2>&1 | grep -v "^  done" | tee "$out/bench_cuda.txt"
python -m minicompiler.bench.training --device cuda --epochs 12 --json "$out/training_cuda.json" 2>&1 | tee "$out/training_cuda.txt"
python benchmarks/bandwidth_check.py 3 2>&1 | tee "$out/bandwidth_check.txt"
python benchmarks/profile_training.py "seed 003 CNN" eager minicompiler reduce-overhead > "$out/profile_training.txt" 2>&1
grep "^==" "$out/profile_training.txt"
