#!/usr/bin/env bash
# How tests/data/h200/bench/* were captured: on lent H200 hosts (the device tool), from the
# repo root: `bash tests/data/h200/bench/capture.sh KIND` (KIND = h200x1 or h200x2).
set -u
kind=${1:-h200x1}
for b in matmul memcpy allreduce; do
  echo "\$ python3 journal/benchmarks/scripts/gpu.py $b"
  python3 journal/benchmarks/scripts/gpu.py $b 2>&1
done > "$OUT/$kind.txt"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader >> "$OUT/$kind.txt"
cat "$OUT/$kind.txt"
