#!/usr/bin/env bash
# How tests/data/h100/nccl/* were captured: on a lent one-GPU host (the device tool,
# nvidia-h100-x1: no kind of two GPUs was lent), from the repo root,
# `bash tests/data/h100/nccl/capture.sh`; the files land in $OUT. Only the image's python
# (torch, its NCCL) and journal's stdlib-only scripts run there.
#
# - torch-env.json: journal's torch-env probe (what `journal run probe torch-env` records);
# - allreduce-*.txt: a one-rank NCCL all-reduce under NCCL_DEBUG=INFO, once with NCCL's own
#   choice and once per tuning (NCCL_ALGO / NCCL_PROTO), NCCL_NVLS_ENABLE=0 as the machine
#   requires: the banner says the NCCL each run actually loaded (one rank moves no bytes
#   between GPUs: its time is no bus bandwidth);
# - builtin-allreduce.txt: journal's built-in allreduce benchmark on the one GPU (it says it
#   needs two).
set -u
py=python3
$py journal/probes/scripts/torch_env.py --import-torch > "$OUT/torch-env.json" 2> "$OUT/torch-env.err"
cat > /tmp/one_rank.py <<'PY'
import os, time
import torch
import torch.distributed as dist

dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29531", rank=0, world_size=1)
x = torch.ones(64 * 1024 * 1024 // 4, device="cuda")
for _ in range(5):
    dist.all_reduce(x)
torch.cuda.synchronize()
start, n = time.perf_counter(), 20
for _ in range(n):
    dist.all_reduce(x)
torch.cuda.synchronize()
took = (time.perf_counter() - start) / n
print(
    f"torch {torch.__version__} NCCL {'.'.join(map(str, torch.cuda.nccl.version()))} "
    f"NCCL_ALGO={os.environ.get('NCCL_ALGO', '-')} NCCL_PROTO={os.environ.get('NCCL_PROTO', '-')} "
    f"one-rank all_reduce of 64 MiB: {took * 1e6:.1f} us"
)
dist.destroy_process_group()
PY
run() {  # name, then the tuning variables
  local name=$1; shift
  env NCCL_DEBUG=INFO NCCL_NVLS_ENABLE=0 "$@" $py /tmp/one_rank.py > "$OUT/allreduce-$name.txt" 2>&1
  echo "rc=$?" >> "$OUT/allreduce-$name.txt"
}
run default
run ring-simple NCCL_ALGO=Ring NCCL_PROTO=Simple
run tree-ll NCCL_ALGO=Tree NCCL_PROTO=LL
$py journal/benchmarks/scripts/gpu.py allreduce > "$OUT/builtin-allreduce.txt" 2>&1
echo "rc=$?" >> "$OUT/builtin-allreduce.txt"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > "$OUT/nvidia-smi-query.csv" 2>&1
head -c 3000 "$OUT"/allreduce-default.txt
tail -3 "$OUT"/allreduce-*.txt "$OUT/builtin-allreduce.txt"
