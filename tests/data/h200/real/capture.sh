#!/usr/bin/env bash
# How tests/data/h200/real/* were made: a plan recorded end to end on a lent H200 host (the
# device tool) on the image's own torch env, journal installed from its wheel in a venv of its
# own (no network there). From the repo root, with the wheels carried as .whl/ (journal's wheel
# and its dependencies for Python 3.12 in .whl/deps, numpy 2.3.5 and 2.5.2 in .whl/mirror, the
# host's package mirror): `bash tests/data/h200/real/capture.sh [quick]`.
# Everything lands in $OUT/h200-real.tar.gz (unpacked into tests/data/h200/real/).
set -u
py=${PY:-$(command -v python3)}; deps=${DEPS:-.whl/deps}; mirror=${MIRROR:-$PWD/.whl/mirror}
work=$(mktemp -d); out=$work/out; mkdir -p "$out"
# journal's own env, apart from the env it records (the probe python sees none of journal's
# packages)
"$py" -m venv --without-pip "$work/jv" || exit 1
"$py" -m pip --python "$work/jv/bin/python" install -q --no-index \
  --find-links "$deps" journal > "$out/install.txt" 2>&1 || { cat "$out/install.txt"; exit 1; }
J="$work/jv/bin/journal"
# the host's mirror, pip's and uv's default index there (a rollback takes numpy 2.5.2 from it
# again: journal's rollback uses the uv on the host's PATH)
export PIP_NO_INDEX=1 PIP_FIND_LINKS="$mirror" PIP_DISABLE_PIP_VERSION_CHECK=1
export UV_NO_INDEX=1 UV_FIND_LINKS="$mirror" UV_OFFLINE=1
cat > "$work/runbook.toml" <<TOML
[journal]
name = "h200-real"

[hosts.h200]
ssh = "local"
python = "$py"

[[steps]]
name = "downgrade-numpy"
run = "$py -m pip install numpy==2.3.5"
probes = ["torch-env"]

[[steps]]
name = "verify"
run = "$py -c 'import numpy, torch; print(\"numpy\", numpy.__version__, \"torch\", torch.__version__, torch.cuda.is_available())'"
probes = ["torch-env"]

[benchmarks.matmul]
builtin = "matmul"

[benchmarks.memcpy]
builtin = "memcpy"

[benchmarks.allreduce]
builtin = "allreduce"
TOML
cp "$work/runbook.toml" "$out/runbook.toml"
j() { echo "\$ journal $*"; "$J" --db "$work/journal.db" --runbook "$work/runbook.toml" "$@"; echo "rc=$?"; }
t() { local s=$EPOCHREALTIME; "$@"; local rc=$?; awk -v a="$s" -v b="$EPOCHREALTIME" -v c="$*" -v r=$rc 'BEGIN{printf "%.3f s rc=%d: %s\n", b-a, r, c}' >> "$out/timings.txt"; }
{
  "$py" --version; "$py" -m pip --version; command -v uv && uv --version; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  t "$py" -c "import json, sys; sys.argv=['p']; exec(open('journal/probes/scripts/packages.py').read())" > "$out/packages-raw.json"
  j --help > /dev/null
  if [ "${1:-}" = quick ]; then j run probe packages; j show --format json 2>&1 | head -c 2000; exit 0; fi
  t j run probe torch-env
  t j run bench matmul --label phase=before
  t j run bench memcpy --label phase=before
  t j run bench allreduce --label phase=before
  t j run step downgrade-numpy
  t j run step verify
  t j run bench matmul --label phase=after
  t j run bench memcpy --label phase=after
  t j rollback --to before:downgrade-numpy --dry-run
  t j rollback --to before:downgrade-numpy
  t j run step verify
  t j status
  t j log
  t j pitfalls --all
  j pitfalls --all --format json > "$out/pitfalls.json"
  j status --format json > "$out/status.json"
  j log --format json > "$out/log.json"
  t j export postmortem --format md -o "$out/postmortem.md"
  t j export postmortem --format json -o "$out/postmortem.json"
  t j export postmortem --format html -o "$out/postmortem.html"
  t j verify
  "$py" -m pip list --format json > "$out/pip-list-after.json" 2>/dev/null
} > "$out/session.txt" 2>&1
# what a snapshot of this env costs (bench/snapshot.py), before and after issue 25's change
"$work/jv/bin/python" bench/snapshot.py --python "$py" --rounds 5 --old-redact .whl/old_redact.py > "$out/snapshot-bench.txt" 2>&1
# the web UI on that journal
( "$J" --db "$work/journal.db" --runbook "$work/runbook.toml" serve --port 5077 > "$out/serve.txt" 2>&1 & )
for _ in $(seq 50); do curl -fs http://127.0.0.1:5077/ > /dev/null && break; sleep 0.2; done
mkdir -p "$out/web"
fetch() { local name; name=$(echo "$1" | tr '/?=&.' '_____'); curl -sL -w "%{http_code} %{time_total} $1\n" "http://127.0.0.1:5077$1" -o "$out/web/p$name.html" >> "$out/web/codes.txt"; grep -o 'href="/[^"#]*"' "$out/web/p$name.html" | sed 's/href="//; s/"$//'; }
level=$(fetch /); seen=" / "
for _ in 1 2; do
  next=""
  for path in $(echo "$level" | grep -v '/vendor/\|\.css$\|/raw$\|/cast$\|/live$' | sort -u | head -60); do
    case "$seen" in *" $path "*) continue;; esac
    seen="$seen $path "; next="$next $(fetch "$path")"
  done
  level=$next
done
cp "$work/journal.db" "$out/journal.db"
tar -C "$out" -czf "$OUT/h200-real.tar.gz" .
cat "$out/session.txt" | tail -c 9000
cat "$out/timings.txt" "$out/snapshot-bench.txt"
