#!/usr/bin/env bash
# How tests/data/h200/terminal/* were captured: on a lent H200 host (the device tool), from the
# repo root, `bash tests/data/h200/capture-terminal.sh`; each command's output (stdout and
# stderr, as a terminal shows them) lands in $OUT/terminal/NAME.txt, copied here unchanged.
# These are the raw outputs the transcripts under tests/data/transcripts/h200-*.txt are made of.
set -u
out=${OUT:-/tmp}/terminal; mkdir -p "$out"; py=python3
c() { local name=$1; shift; { printf '$ %s\n' "$*"; bash -c "$*" 2>&1; } > "$out/$name.txt"; }
c nvidia-smi 'nvidia-smi'
c nvcc 'nvcc --version'
c print-three "$py -c \"import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version())\""
c print-available "$py -c \"import torch; print(torch.__version__, torch.cuda.nccl.version(), torch.cuda.is_available())\""
c print-fstring "$py -c \"import torch; print(f'torch {torch.__version__} cuda {torch.version.cuda} nccl {torch.cuda.nccl.version()}')\""
c print-alias "$py -c \"import torch as t; print(t.__version__, t.version.cuda); print(t.cuda.get_device_name(0), t.cuda.get_device_capability(0))\""
c print-labels "$py -c \"import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())\""
c nccl-debug "NCCL_DEBUG=INFO MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 $py -c \"import torch, torch.distributed as dist; dist.init_process_group('nccl', rank=0, world_size=1, device_id=torch.device('cuda:0')); t = torch.ones(4, device='cuda'); dist.all_reduce(t); torch.cuda.synchronize(); print('all_reduce ok', t.tolist()); dist.destroy_process_group()\""
c nccl-tuned "NCCL_DEBUG=INFO NCCL_ALGO=Ring NCCL_PROTO=Simple MASTER_ADDR=127.0.0.1 MASTER_PORT=29512 $py -c \"import torch, torch.distributed as dist; dist.init_process_group('nccl', rank=0, world_size=1, device_id=torch.device('cuda:0')); t = torch.ones(4, device='cuda'); dist.all_reduce(t); torch.cuda.synchronize(); print('all_reduce ok', t.tolist()); dist.destroy_process_group()\""
c nccl-env 'env | grep -E "^NCCL" | sort; ls -l /usr/lib/x86_64-linux-gnu/libnccl* 2>&1 | head; dpkg -l 2>/dev/null | grep -i nccl'
c pip-nccl "$py -m pip list 2>/dev/null | grep -iE 'torch|nccl|nvidia-cuda-runtime|numpy'"
c collect-env "$py -m torch.utils.collect_env"
# A Python session typed at the interpreter's prompt, through a pseudo-terminal (script(1)).
printf 'import torch\ntorch.__version__\ntorch.version.cuda\ntorch.cuda.nccl.version()\ntorch.cuda.is_available()\nprint(torch.__version__, torch.version.cuda, torch.cuda.nccl.version())\nexit()\n' \
  | script -qfec "$py -i -q" /dev/null > "$out/repl.txt" 2>&1
ls -la "$out"
