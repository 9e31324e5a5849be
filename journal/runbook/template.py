"""The commented runbook `journal init` writes."""

TEMPLATE = """\
# runbook.toml: the plan of an upgrade, run and recorded by `journal`.
# `journal run plan` runs the steps in order and stops at the first failure;
# `journal run step NAME` runs one; `journal status` shows how far it got.

[journal]
name = "{name}"
# Values to blank out of everything recorded (commands, env, output), besides
# variables named *_TOKEN, *_PASSWORD, *_SECRET, *_KEY, which are always redacted.
redact = []

# One table per machine. ssh = "user@host", "user@host:port", an alias from
# ~/.ssh/config, or "local". python is the env being upgraded (probes use it).
[hosts.this-machine]
ssh = "local"
python = "python3"
# accept_new_host_key = true   # accept (and record) an SSH host key not yet known
# uv = "/usr/local/bin/uv"     # the uv `journal rollback` uses (default: the PATH's, else pip)

# Groups name several hosts at once: `journal run step NAME --group gpu` (with --rolling N
# to go N hosts at a time, stopping at a failure), or hosts = ["gpu"] in a step.
# [groups]
# gpu = ["this-machine"]

[[steps]]
name = "backup-env"
# freezes the env being upgraded: give it the same python as the host's `python` above
run = "mkdir -p backup && python3 -m pip freeze > backup/requirements-before.txt"

[[steps]]
name = "show-python"
run = "python3 -c 'import sys; print(sys.version)'"
# env = { CUDA_HOME = "/usr/local/cuda-13.0" }
# cwd = "~/work"
# timeout = 3600               # seconds

# An upgrade step proves itself: package snapshots are taken before and after it, the
# torch-env probe reads torch / CUDA / NCCL / driver after it, and expect fails the step when
# the stack is not what was asked for (globs, PEP 440 ranges, "not installed").
# [[steps]]
# name = "install-torch"
# run = "uv pip install --reinstall torch --index-url https://download.pytorch.org/whl/cu130"
# probes = ["torch-env"]
# expect = { "torch.version" = "*+cu130", "torch.cuda" = "13.0", "nccl" = ">=2.28" }

# A probe of your own: a command printing one JSON object (or capture = { field = "regex" }).
# `journal run probe gpu-clocks` runs it alone; probes = ["gpu-clocks"] runs it after a step.
# [probes.gpu-clocks]
# run = "nvidia-smi --query-gpu=clocks.sm --format=csv,noheader | head -1 | jq -R '{sm: .}'"
# json = true

# Throughput before and after: `journal run bench serving --label phase=before`, then after.
# [benchmarks.serving]
# run = "python3 -m sglang.bench_serving --backend sglang --max-concurrency 1 --num-prompts 32"
# parser = "sglang"                 # sglang | vllm | nccl-tests | llama-bench | regex

# Tell people when it matters: a webhook posted to when a step fails, a finding is made, the
# plan finishes, hosts drift or a rollback runs (every attempt recorded; the URL never is).
# `journal notify test team` sends a sample. Links go to [journal] base_url (journal serve).
# [notify.team]
# url_env = "SLACK_WEBHOOK"         # or url = "https://hooks.slack.com/services/…"
# format = "slack"                  # slack | json
# on = ["step-failed", "finding:warning", "plan-finished", "drift", "rollback"]
"""
