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

# Groups name several hosts at once: `journal run step NAME --group gpu` (with --rolling N
# to go N hosts at a time, stopping at a failure), or hosts = ["gpu"] in a step.
# [groups]
# gpu = ["this-machine"]

[[steps]]
name = "backup-env"
run = "mkdir -p backup && python3 -m pip freeze > backup/requirements-before.txt"

[[steps]]
name = "show-python"
run = "python3 -c 'import sys; print(sys.version)'"
# env = { CUDA_HOME = "/usr/local/cuda-13.0" }
# cwd = "~/work"
# timeout = 3600               # seconds
"""
