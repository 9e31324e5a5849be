#!/usr/bin/env bash
# How tests/data/h200/bench/journal-h200{,x2}.* were made: `journal run bench` of the built-in GPU
# benchmarks on a lent H200 host (the device tool), from the repo root, with journal's own
# dependencies carried as .device/site.tar.gz (pip install --target for the host's python 3.12).
# Everything lands in $OUT, named after $1 (journal-h200 on one GPU, journal-h200x2 on two).
set -u
tag=${1:-journal-h200}
site=$(mktemp -d); work=$(mktemp -d)
tar xzf .device/site.tar.gz -C "$site"
export PYTHONPATH="$PWD:$site"
py=$(command -v python3)
cat > "$work/runbook.toml" <<EOF
[journal]
name = "h200-bench"

[hosts.h200]
ssh = "local"
python = "$py"

[[steps]]
name = "probe-stack"
run = "nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader"
probes = ["torch-env"]

[benchmarks.matmul]
builtin = "matmul"

[benchmarks.memcpy]
builtin = "memcpy"

[benchmarks.allreduce]
builtin = "allreduce"
EOF
j() { python3 -m journal --db "$work/journal.db" --runbook "$work/runbook.toml" "$@"; echo "rc=$?"; }
{
  j run bench matmul --label phase=before
  j run bench memcpy --label phase=before
  j run step probe-stack
  j run bench matmul --label phase=after
  j run bench memcpy --label phase=after
  j run bench allreduce
  j log
  j pitfalls
  j verify
} > "$OUT/$tag.txt" 2>&1
j export postmortem --format json -o "$OUT/$tag-postmortem.json" >> "$OUT/$tag.txt" 2>&1
j export postmortem --format md -o "$OUT/$tag-postmortem.md" >> "$OUT/$tag.txt" 2>&1
cp "$work/journal.db" "$OUT/$tag.db"
cat "$OUT/$tag.txt"
