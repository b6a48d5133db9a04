#!/usr/bin/env bash
# The course's GPU checks on the lent H100, in one call of at most ~9 minutes; results land in $OUT:
#   bash benchmarks/course_gpu.sh            (carry .whl, .whl_gpu: see README.md "GPU runs")
#
#   device.txt        GPU, driver, versions; the CUDA cases of the gradient tests (kinks, timm-style
#                     residual blocks), tests/runtime and the layout tests, Triton on the GPU itself
#   timm_training.*   timm ResNet-18/50 training steps, eager vs minicompiler: gradients checked, times
#   notebooks.tar     notebooks 11 and 12 executed on the GPU (their GPU cells run), as
#                     notebooks/execute.py stores them
set -uo pipefail
out=${OUT:-course_out}
mkdir -p "$out"
export MINICOMPILER_PROGRESS=0
start=$(date +%s)
part() { echo "== $1 ($(( $(date +%s) - start )) s since start)"; }

part device
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
  date -u +%Y-%m-%dT%H:%MZ
  timeout 90 python -m pytest -q -p no:cacheprovider -k "cuda or gpu or runtime" \
      tests/autograd/test_gradients_at_kinks.py tests/training/test_residual_blocks.py tests/runtime \
      tests/test_compiled_layout.py tests/training/test_training_end_to_end.py 2>&1 | tail -4
} 2>&1 | tee "$out/device.txt"

part "timm training"
timeout 120 python -m minicompiler.bench --device cuda --no-kernels --no-torch-compile --modes default \
    --tasks training --only resnet --repeats 5 --deadline-s 70 --json "$out/timm_training.json" \
    > "$out/timm_training.txt" 2> "$out/timm_training.log"
tail -20 "$out/timm_training.txt"

part notebooks
for notebook in 11_models_and_training 12_next_to_torch_compile_and_debugging; do
  timeout 170 python notebooks/execute.py "notebooks/$notebook.ipynb" 2>&1 | grep -v "^\[IPKernelApp\]" | tail -3
done
tar -cf "$out/notebooks.tar" notebooks/11_models_and_training.ipynb notebooks/12_next_to_torch_compile_and_debugging.ipynb
part done
