#!/usr/bin/env bash
# The course on the lent GPU machine: notebooks executed there (their GPU cells' outputs stored) and
# nbval over notebooks with every GPU cell live. Results land in $OUT:
#
#   bash benchmarks/course_gpu.sh --execute 11 --nbval 00 01 02    (carry .whl, .whl_gpu: README "GPU runs")
#
#   device.txt         GPU, driver, Python, torch, triton, date
#   executed.tar       the notebooks named after --execute, as notebooks/execute.py stores them
#   nbval_<first>.txt  nbval's summary over the notebooks named after --nbval (numbers are prefixes)
#
# A device call lasts 10 minutes at most: notebook 10 runs its GPU cells under a per-cell budget
# (NB10_GPU_BUDGET_S), and the whole course takes two or three calls.
set -uo pipefail
out=${OUT:-course_out}
mkdir -p "$out"
export MINICOMPILER_PROGRESS=0 NB10_GPU_BUDGET_S=${NB10_GPU_BUDGET_S:-10}
start=$(date +%s)
part() { echo "== $1 ($(( $(date +%s) - start )) s since start)"; }
notebooks_named() { for prefix in "$@"; do ls notebooks/"$prefix"_*.ipynb; done; }

execute=() nbval=() list=execute
for arg in "$@"; do
  case "$arg" in
    --execute) list=execute ;;
    --nbval) list=nbval ;;
    *) if [ "$list" = execute ]; then execute+=("$arg"); else nbval+=("$arg"); fi ;;
  esac
done

part device
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
  date -u +%Y-%m-%dT%H:%MZ
} 2>&1 | tee "$out/device.txt"

if [ ${#execute[@]} -gt 0 ]; then
  part "execute ${execute[*]}"
  for notebook in $(notebooks_named "${execute[@]}"); do
    timeout 300 python notebooks/execute.py "$notebook" 2>&1 | grep -v "^\[IPKernelApp\]" | tail -3
  done
  tar -cf "$out/executed.tar" $(notebooks_named "${execute[@]}")
fi

if [ ${#nbval[@]} -gt 0 ]; then
  part "nbval ${nbval[*]}"
  timeout "${NBVAL_TIMEOUT_S:-560}" python -m pytest -q -p no:randomly -p no:cacheprovider --nbval \
      --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg -rs $(notebooks_named "${nbval[@]}") \
      > "$out/nbval_${nbval[0]}.txt" 2>&1
  grep -v "^\[IPKernelApp\]" "$out/nbval_${nbval[0]}.txt" | tail -40
fi
part done
