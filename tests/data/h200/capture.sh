#!/usr/bin/env bash
# How tests/data/h200/* were captured: on a lent H200 host (the device tool), from the repo root,
# `bash tests/data/h200/capture.sh`; everything lands in $OUT/h200.tar.gz, unpacked here.
set -u
out=$(mktemp -d); py=python3
t() { local s=$EPOCHREALTIME; "$@"; local rc=$?; awk -v a="$s" -v b="$EPOCHREALTIME" -v c="$*" -v r=$rc 'BEGIN{printf "%.3f s rc=%d: %s\n", b-a, r, c}' >> "$out/timings.txt"; }
{ uname -a; $py --version; command -v $py; } > "$out/uname.txt"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,compute_cap --format=csv,noheader,nounits > "$out/nvidia-smi-query.csv" 2>&1
nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1
env | grep -E '^(NCCL|CUDA|TORCH|NVIDIA|LD_LIBRARY)' | sort > "$out/env.txt"
t $py -c "import torch"
for round in 1 2 3; do
  t $py journal/probes/scripts/torch_env.py > "$out/torch-env.json"
  t $py journal/probes/scripts/torch_env.py --import-torch > "$out/torch-env-import.json"
  t $py -m torch.utils.collect_env > "$out/collect_env.txt" 2>&1
done
# The same probe where python has no pynvml: the nvidia-smi fallback on a real GPU.
t $py -c "import sys, runpy; sys.modules['pynvml'] = None; sys.argv = ['torch_env.py']; runpy.run_path('journal/probes/scripts/torch_env.py', run_name='__main__')" > "$out/torch-env-no-pynvml.json"
t $py journal/probes/scripts/packages.py > "$out/packages.json"
t $py -m pip list --format json > "$out/pip-list.json" 2>/dev/null
$py -c "import torch; print(torch._C._cuda_getArchFlags()); print(torch.cuda.get_arch_list())" > "$out/torch-arch.txt" 2>&1
tar -C "$out" -czf "$OUT/h200.tar.gz" .
cat "$out/timings.txt"
# The probe benchmark, on the same python.
PYTHONUNBUFFERED=1 $py bench/probe.py --python $py --rounds 3
