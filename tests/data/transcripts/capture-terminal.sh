#!/usr/bin/env bash
# Re-capture the term-*.txt transcripts: real uv and pip output as a terminal shows it.
#
#   bash tests/data/transcripts/capture-terminal.sh [OUTDIR]
#
# Writes term-*.txt into OUTDIR (default: $CAPTURE_WORK/out). Nothing after a prompt line in
# those files is written by this script: it is the raw bytes that the real command wrote to a
# pseudo-terminal (SGR colours, `\r` redraws, cursor movement and all). The script only picks
# the commands, writes the `#` header lines and the prompt lines (`ubuntu@gpu-box:~$ CMD`),
# except in term-uv-color-prompt.txt, where a real interactive bash (Debian's /etc/skel/.bashrc,
# colour prompt and xterm title) drew its own prompts and echoed the typed commands.
#
# How:
# - Stand-in wheels (tiny py3-none-any zips with METADATA/WHEEL/RECORD, the approach of
#   journal.demo.wheels; torch carries a filler file of seeded random bytes so downloads are big
#   enough for progress bars) are written as PEP 503 indexes under $CAPTURE_WORK/srv:
#   pypi/simple (a PyPI mirror: numpy, pillow, transformers with 4.57.0 yanked, torch 2.9.1 and
#   2.10.0, acme-serve pinning torch==2.9.1, acme-eval capping numpy<2.4.2 pillow<11.3
#   transformers<4.57, acme-legacy-ext needing numpy<2) and download.pytorch.org-shaped
#   whl/cu128, whl/cu130, whl/nightly/cu130, whl/cpu.
# - They are served on http://127.0.0.1:$PORT by a throttled http.server (16 MiB/s), so
#   pip's and uv's download bars get drawn. The mirror is the default index through
#   UV_INDEX_URL / PIP_INDEX_URL in the environment, as on a box with a configured mirror.
# - Every session gets a fresh $HOME (so fresh uv and pip caches) with `uv` in ~/.local/bin
#   (the repo's .venv/bin/uv unless UV is set) and a venv `ml-env` (python -m venv, pip
#   upgraded to $PIP_VERSION from a wheel fetched once with the caller's pip configuration).
#   Each captured command runs with `bash -c` in a new pty of 120x40, TERM=xterm-256color,
#   LANG=C.UTF-8, a clean environment (`env -i`), PIP_CONFIG_FILE=/dev/null, UV_NO_CONFIG=1.
# - The pty's newline translation (ONLCR) is off, so the files keep the programs' own `\n`;
#   term-uv-crlf.txt keeps ONLCR on (a raw typescript: every newline is CRLF) and its header
#   and prompt lines are written with CRLF too.
# - term-uv-color-prompt.txt needs `unshare --uts` (root) to call the host gpu-box; without it
#   the copied .bashrc gets the host name written in instead of `\h`.
#
# Needs: bash, python3 (>= 3.9, with venv), uv, and for the first run a pip that can download
# pip==$PIP_VERSION. Timings, spinner frames and progress redraws differ from run to run.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
WORK=${CAPTURE_WORK:-/tmp/capture}
OUT=${1:-$WORK/out}
UV=${UV:-$REPO/.venv/bin/uv}
PYTHON=${PYTHON:-$(command -v python3)}
PYTHON=$("$PYTHON" -c 'import sys; print(sys.executable)')  # the real interpreter, not a shim
PORT=${PORT:-8631}
PIP_VERSION=${PIP_VERSION:-26.2.1}
SHOWN_HOST=gpu-box
BASE="http://127.0.0.1:$PORT"
MIRROR="$BASE/pypi/simple"

mkdir -p "$WORK/src" "$OUT"
OUT=$(cd "$OUT" && pwd)
UV=$(cd "$(dirname "$UV")" && pwd)/$(basename "$UV")
UV_VERSION=$("$UV" --version | awk '{print $2}')

# --------------------------------------------------------------------------------------------
# Helpers written as Python files under $WORK/src.
cat > "$WORK/src/build_wheels.py" <<'PY'
"""Write the stand-in wheels and PEP 503 indexes that capture-terminal.sh installs from.

Same approach as journal.demo.wheels: hand-written py3-none-any wheel zips (METADATA, WHEEL,
RECORD) with fixed timestamps, so equal input gives equal bytes, and one `simple` page per
project. torch wheels carry a filler file of seeded random bytes so that they are large enough
for pip's and uv's download progress bars.
"""
from __future__ import annotations

import base64, hashlib, html, io, random, re, sys, zipfile
from pathlib import Path

EPOCH = (1980, 1, 1, 0, 0, 0)
MIB = 1024 * 1024


def stem(name): return re.sub(r"[-_.]+", "_", name).lower()
def project(name): return re.sub(r"[-_.]+", "-", name).lower()


def module(doc, body=""):
    return f'"""{doc}"""\n\nSTAND_IN = True\n{body}'


def wheel(name, version, requires=(), files=None, blobs=None):
    files = dict(files or {})
    if not files:
        files[f"{stem(name)}/__init__.py"] = module(
            f"Stand-in for {name}, built by capture-terminal.sh.", f"__version__ = {version!r}\n")
    di = f"{stem(name)}-{version}.dist-info"
    meta = "\n".join(["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                      f"Summary: Stand-in for {name}, built by capture-terminal.sh.",
                      *(f"Requires-Dist: {r}" for r in requires)]) + "\n\n"
    entries = [(p, t.encode()) for p, t in sorted(files.items())]
    entries += sorted((blobs or {}).items())
    entries.append((f"{di}/METADATA", meta.encode()))
    entries.append((f"{di}/WHEEL", b"Wheel-Version: 1.0\nGenerator: capture-terminal.sh\n"
                    b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    def h(d): return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
    record = "".join(f"{p},{h(d)},{len(d)}\n" for p, d in entries) + f"{di}/RECORD,,\n"
    entries.append((f"{di}/RECORD", record.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p, d in entries:
            info = zipfile.ZipInfo(p, date_time=EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, d)
    return name, version, f"{stem(name)}-{version}-py3-none-any.whl", buf.getvalue()


def torch(version, cuda, nccl=None, mib=4):
    """A torch that answers __version__, version.cuda, cuda.is_available() and nccl.version()."""
    requires = ["filelock", "typing-extensions>=4.10.0"]
    if nccl:
        requires.append(f"{nccl[0]}=={nccl[1]}")
    nccl_t = tuple(int(x) for x in nccl[1].split(".")) if nccl else None
    files = {
        "torch/__init__.py": module("Stand-in for torch, built by capture-terminal.sh.",
                                    "\nfrom torch import cuda, version\nfrom torch.version import __version__\n"),
        "torch/version.py": module("Build facts of the stand-in, shaped like torch.version.",
                                   f"__version__ = {version!r}\ncuda = {cuda!r}\nhip = None\n"),
        "torch/cuda/__init__.py": module("CUDA queries of the stand-in: no GPU here.",
                                         "\nfrom torch.cuda import nccl\n\n\ndef is_available():\n    return False\n\n\n"
                                         "def device_count():\n    return 0\n"),
        "torch/cuda/nccl.py": module("NCCL query of the stand-in.",
                                     f"\n\ndef version():\n    return {nccl_t!r}\n"),
    }
    seed = int(hashlib.sha256(version.encode()).hexdigest()[:8], 16)
    blobs = {"torch/lib/filler.bin": random.Random(seed).randbytes(mib * MIB)}
    return wheel("torch", version, requires, files, blobs)


def tv(version, torch_pin):
    return wheel("torchvision", version, [f"torch=={torch_pin}", "numpy", "pillow!=8.3.*,>=5.3.0"])


COMMON = [wheel("filelock", "3.20.0"), wheel("typing-extensions", "4.15.0",
                                              files={"typing_extensions.py": module("Stand-in.")})]
NCCL12 = ("nvidia-nccl-cu12", "2.27.5")
NCCL13 = ("nvidia-nccl-cu13", "2.28.9")


def nccl(pkg):
    where = "nvidia/cu13/nccl" if pkg[0].endswith("cu13") else "nvidia/nccl"
    return wheel(pkg[0], pkg[1], files={f"{where}/__init__.py": module("Stand-in.", f"__version__ = {pkg[1]!r}\n")})


def pil(version):
    return wheel("pillow", version, files={"PIL/__init__.py": module("Stand-in for pillow.", f"__version__ = {version!r}\n")})


INDEXES = {
    "whl/cu128": [torch("2.10.0+cu128", "12.8", NCCL12, 8), torch("2.9.1+cu128", "12.8", NCCL12, 8),
                  tv("0.25.0+cu128", "2.10.0"), tv("0.24.1+cu128", "2.9.1"), nccl(NCCL12),
                  wheel("numpy", "2.4.2"), pil("12.1.1"), *COMMON],
    "whl/cu130": [torch("2.10.0+cu130", "13.0", NCCL13, 24), torch("2.9.1+cu130", "13.0", NCCL13, 8),
                  tv("0.25.0+cu130", "2.10.0"), tv("0.24.1+cu130", "2.9.1"), nccl(NCCL13),
                  wheel("numpy", "2.4.2"), pil("12.1.1"), *COMMON],
    "whl/nightly/cu130": [torch("2.12.0.dev20260226+cu130", "13.0", NCCL13, 48),
                          tv("0.27.0.dev20260226+cu130", "2.12.0.dev20260226"), nccl(NCCL13),
                          wheel("numpy", "2.4.1"), pil("12.1.0"), *COMMON],
    "whl/cpu": [torch("2.9.1+cpu", None, None, 4), torch("2.10.0+cpu", None, None, 4), *COMMON],
    "pypi/simple": [
        wheel("numpy", "1.26.4"), wheel("numpy", "2.4.1"), wheel("numpy", "2.4.2"),
        pil("11.2.1"), pil("12.1.0"), pil("12.1.1"),
        wheel("transformers", "4.56.2", ["numpy>=1.17", "filelock"]),
        wheel("transformers", "4.57.0", ["numpy>=1.17", "filelock"]),
        wheel("transformers", "4.57.1", ["numpy>=1.17", "filelock"]),
        torch("2.9.1", "12.8", NCCL12, 8), torch("2.10.0", "12.8", NCCL12, 8), nccl(NCCL12),
        wheel("acme-serve", "0.5.9", ["torch==2.9.1", "numpy"]),
        wheel("acme-eval", "1.4.0", ["numpy<2.4.2", "pillow<11.3", "transformers<4.57"]),
        wheel("acme-legacy-ext", "0.3.1", ["numpy<2"]),
        *COMMON],
}
#: PEP 592: versions the mirror marks as yanked, with the reason shown by pip.
YANKED = {("transformers", "4.57.0"): "Broken import of transformers.models on Python 3.11"}


def page(title, links):
    a = "".join(f'    <a href="{html.escape(h)}"{y}>{html.escape(t)}</a><br/>\n' for h, t, y in links)
    return (f'<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.0">\n'
            f"    <title>{html.escape(title)}</title>\n  </head>\n  <body>\n    <h1>{html.escape(title)}</h1>\n"
            f"{a}  </body>\n</html>\n").encode()


def write(path: Path, data: bytes):
    if path.exists() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def main(root: Path):
    for index, wheels in INDEXES.items():
        by = {}
        for name, version, fn, data in wheels:
            by.setdefault(project(name), []).append((name, version, fn, data))
        for proj, members in sorted(by.items()):
            links = []
            for name, version, fn, data in members:
                write(root / index / proj / fn, data)
                y = YANKED.get((name, version))
                ya = f' data-yanked="{html.escape(y)}"' if y else ""
                links.append((f"{fn}#sha256={hashlib.sha256(data).hexdigest()}", fn, ya))
            write(root / index / proj / "index.html", page(f"Links for {proj}", links))
        write(root / index / "index.html", page("Simple index", [(f"{p}/", p, "") for p in sorted(by)]))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
PY

cat > "$WORK/src/serve.py" <<'PY'
"""Serve a folder over HTTP on loopback, throttled so that download progress bars get drawn."""
import functools, http.server, sys, time

RATE = int(sys.argv[3]) if len(sys.argv) > 3 else 16 * 1024 * 1024  # bytes per second


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def copyfile(self, source, outputfile):
        while True:
            data = source.read(256 * 1024)
            if not data:
                break
            outputfile.write(data)
            time.sleep(len(data) / RATE)


server = http.server.ThreadingHTTPServer(
    ("127.0.0.1", int(sys.argv[2])), functools.partial(Handler, directory=sys.argv[1]))
server.serve_forever()
PY

cat > "$WORK/src/ptyrun.py" <<'PY'
"""Run one shell command in a pseudo-terminal and write everything it printed to stdout, raw.

The terminal is COLS x ROWS (default 120 x 40), TERM comes from the environment. The tty's
newline translation (ONLCR) is switched off unless --crlf is given, so the bytes are the
program's own: its \r, escape sequences and \n as written. Exits with the command's status.
"""
import argparse, fcntl, os, pty, select, struct, subprocess, sys, termios, time

ap = argparse.ArgumentParser()
ap.add_argument("--cols", type=int, default=120)
ap.add_argument("--rows", type=int, default=40)
ap.add_argument("--crlf", action="store_true")
ap.add_argument("--timeout", type=float, default=300)
ap.add_argument("command")
args = ap.parse_args()

master, slave = pty.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", args.rows, args.cols, 0, 0))
attrs = termios.tcgetattr(slave)
if not args.crlf:
    attrs[1] &= ~termios.ONLCR
termios.tcsetattr(slave, termios.TCSANOW, attrs)


def child_tty():
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


proc = subprocess.Popen(["bash", "-c", args.command], stdin=slave, stdout=slave, stderr=slave,
                        preexec_fn=child_tty, close_fds=True)
os.close(slave)
out = bytearray()
deadline = time.monotonic() + args.timeout
while time.monotonic() < deadline:
    ready, _, _ = select.select([master], [], [], 0.1)
    if ready:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the last holder of the terminal closed it
            break
        if not data:
            break
        out += data
    elif proc.poll() is not None:
        break
proc.wait(timeout=30)
os.close(master)
sys.stdout.buffer.write(out)
sys.exit(proc.returncode)
PY

cat > "$WORK/src/ptybash.py" <<'PY'
"""Drive a real interactive bash in a pseudo-terminal: type each command of a file once the
prompt is drawn, and write the whole session (prompts, readline's echo, output) to stdout raw,
up to and including the last prompt.

Usage: ptybash.py [--cols N] [--rows N] COMMANDS_FILE -- BASH_ARGV...
A prompt is taken as drawn when the output ends with PROMPT_END (the colour prompt's
`\e[00m# ` / `\e[00m$ `) and then stays quiet for a moment. ONLCR is off, as in ptyrun.py.
"""
import argparse, fcntl, os, pty, select, struct, subprocess, sys, termios, time

ap = argparse.ArgumentParser()
ap.add_argument("--cols", type=int, default=120)
ap.add_argument("--rows", type=int, default=40)
ap.add_argument("--timeout", type=float, default=300)
ap.add_argument("commands")
ap.add_argument("argv", nargs=argparse.REMAINDER)
args = ap.parse_args()
argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
commands = [line for line in open(args.commands).read().splitlines() if line.strip()]
PROMPT_END = (b"\x1b[00m# ", b"\x1b[00m$ ")

master, slave = pty.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", args.rows, args.cols, 0, 0))
attrs = termios.tcgetattr(slave)
attrs[1] &= ~termios.ONLCR
termios.tcsetattr(slave, termios.TCSANOW, attrs)


def child_tty():
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, preexec_fn=child_tty,
                        close_fds=True)
os.close(slave)
out = bytearray()


def until_prompt():
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            out.extend(os.read(master, 65536))
        elif out.endswith(PROMPT_END):
            return
    raise SystemExit("no prompt came back:\n" + out[-2000:].decode(errors="replace"))


until_prompt()
for command in commands:
    for ch in command.encode():  # typed, one key at a time
        os.write(master, bytes([ch]))
        time.sleep(0.01)
    os.write(master, b"\r")
    until_prompt()
session = bytes(out)
os.write(master, b"exit\r")
try:
    while os.read(master, 65536):
        pass
except OSError:
    pass
proc.wait(timeout=30)
sys.stdout.buffer.write(session)
PY

# --------------------------------------------------------------------------------------------
log() { printf '== %s\n' "$*" >&2; }

log "building wheels under $WORK/srv"
"$PYTHON" "$WORK/src/build_wheels.py" "$WORK/srv"
if ! ls "$WORK/pipwheel"/pip-"$PIP_VERSION"-*.whl >/dev/null 2>&1; then
    log "fetching pip $PIP_VERSION"
    "$PYTHON" -m pip download -q --no-deps -d "$WORK/pipwheel" "pip==$PIP_VERSION"
fi

"$PYTHON" "$WORK/src/serve.py" "$WORK/srv" "$PORT" >/dev/null 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    "$PYTHON" -c "import urllib.request; urllib.request.urlopen('$MIRROR/')" 2>/dev/null && break
    sleep 0.1
done

HOMEDIR=
ACTIVE=0
PROMPT=
FILE=
EOL=$'\n'

# new_home NAME: a fresh $HOME with uv in ~/.local/bin and a venv ml-env (pip $PIP_VERSION).
new_home() {
    HOMEDIR="$WORK/homes/$1"
    rm -rf "$HOMEDIR"
    mkdir -p "$HOMEDIR/.local/bin"
    ln -s "$UV" "$HOMEDIR/.local/bin/uv"
    "$PYTHON" -m venv "$HOMEDIR/ml-env"
    "$HOMEDIR/ml-env/bin/python" -m pip install -q --disable-pip-version-check --no-index \
        --find-links "$WORK/pipwheel" --upgrade "pip==$PIP_VERSION"
    ACTIVE=0
}

# in_env CMD...: run CMD in the session's clean environment, from $HOME.
in_env() {
    local path="$HOMEDIR/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    local venv=()
    if [ "$ACTIVE" = 1 ]; then
        path="$HOMEDIR/ml-env/bin:$path"
        venv=(VIRTUAL_ENV="$HOMEDIR/ml-env")
    fi
    (cd "$HOMEDIR" && env -i HOME="$HOMEDIR" USER=root LOGNAME=root SHELL=/bin/bash PATH="$path" \
        TERM=xterm-256color LANG=C.UTF-8 \
        UV_NO_CONFIG=1 UV_PYTHON_DOWNLOADS=never UV_INDEX_URL="$MIRROR" \
        PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_INDEX_URL="$MIRROR" \
        "${venv[@]}" "$@")
}

# setup CMD: prepare the state before the capture (not shown).
setup() { in_env bash -c "$1" >>"$WORK/setup.log" 2>&1; }

# begin NAME HEADER-LINES...: start OUT/NAME with `# ` header lines.
begin() {
    FILE="$OUT/$1"
    shift
    : >"$FILE"
    local line
    for line in "$@"; do printf '# %s%s' "$line" "$EOL" >>"$FILE"; done
}

# cap CMD [ptyrun options]: a prompt line, then what CMD printed in a pty.
cap() {
    local cmd=$1
    shift
    printf '%s%s%s' "$PROMPT" "$cmd" "$EOL" >>"$FILE"
    in_env "$PYTHON" "$WORK/src/ptyrun.py" "$@" "$cmd" >>"$FILE" || true
}

COMMON="Captured by capture-terminal.sh: real uv $UV_VERSION / pip $PIP_VERSION in a 120x40 pty (TERM=xterm-256color), stand-in wheels served on 127.0.0.1:$PORT (the PyPI mirror is set through UV_INDEX_URL / PIP_INDEX_URL). Output bytes are unedited."
CU128="$BASE/whl/cu128"
CU130="$BASE/whl/cu130"
NIGHTLY="$BASE/whl/nightly/cu130"
CPU="$BASE/whl/cpu"
OLD_STACK="uv pip install --python ml-env/bin/python torch==2.10.0+cu128 torchvision==0.25.0+cu128 --index-url $CU128"
PY='ml-env/bin/python'

# --------------------------------------------------------------------------------------------
log term-uv-color-downgrade.txt
new_home downgrade
setup "uv pip install --python $PY numpy==2.4.2 pillow==12.1.1 transformers==4.57.1"
PROMPT='ubuntu@gpu-box:~$ '
begin term-uv-color-downgrade.txt "$COMMON" \
    "uv forced to colour (--color always) while its output goes through tee: acme-eval caps numpy<2.4.2, pillow<11.3, transformers<4.57."
cap "uv pip install --python $PY --color always acme-eval 2>&1 | tee uv-install.log"
cap "$PY -c \"import numpy, PIL, transformers; print(numpy.__version__, PIL.__version__, transformers.__version__)\""

log term-pip-color-torch-replaced.txt
new_home pip-replaced
setup "$OLD_STACK"
ACTIVE=1
PROMPT='(ml-env) ubuntu@gpu-box:~$ '
begin term-pip-color-torch-replaced.txt "$COMMON" \
    "pip in a terminal (its own colours): acme-serve pins torch==2.9.1 while torch 2.10.0+cu128 and torchvision 0.25.0+cu128 are installed."
cap "pip install acme-serve"
cap "python -c \"import torch; print(torch.__version__, torch.version.cuda)\""

log term-pip-progress.txt
new_home pip-progress
setup "$OLD_STACK"
ACTIVE=1
PROMPT='(ml-env) ubuntu@gpu-box:~$ '
begin term-pip-progress.txt "$COMMON" \
    "pip downloads a 48 MiB torch nightly: its progress bar redraws in place (\\r, cursor hide/show)."
cap "pip install --pre --upgrade torch torchvision --index-url $NIGHTLY"
cap "python -c \"import torch; print(torch.__version__, torch.version.cuda)\""

log term-uv-crlf.txt
new_home crlf
setup "$OLD_STACK"
PROMPT='ubuntu@gpu-box:~$ '
EOL=$'\r\n'
begin term-uv-crlf.txt "$COMMON" \
    "A raw typescript with CRLF line ends: here the pty's newline translation (ONLCR) was left on, so every newline uv and python wrote came out as CRLF; header and prompt lines are written with CRLF to match."
cap "uv pip install --python $PY --reinstall torch torchvision --index-url $NIGHTLY" --crlf
cap "$PY -c \"import torch; print('torch:', torch.__version__); print('CUDA:', torch.version.cuda)\"" --crlf
EOL=$'\n'

log term-uv-color-prompt.txt
new_home color-prompt
setup "$OLD_STACK"
cp /etc/skel/.bashrc "$HOMEDIR/.bashrc"
shell=(unshare --uts sh -c "hostname $SHOWN_HOST && exec bash --rcfile \"\$HOME/.bashrc\" -i")
if ! unshare --uts true 2>/dev/null; then
    sed -i "s/\\\\h/$SHOWN_HOST/g" "$HOMEDIR/.bashrc"
    shell=(bash --rcfile "$HOMEDIR/.bashrc" -i)
fi
cat >"$WORK/color-prompt.commands" <<'CMDS'
source ml-env/bin/activate
uv pip install acme-legacy-ext
python -c "import numpy, torch; print('numpy', numpy.__version__, 'torch', torch.__version__)"
CMDS
begin term-uv-color-prompt.txt "$COMMON" \
    "A real interactive bash with Debian's /etc/skel/.bashrc (colour prompt, xterm title, bracketed paste), as root on a host named gpu-box; commands typed on its terminal. acme-legacy-ext needs numpy<2."
in_env "$PYTHON" "$WORK/src/ptybash.py" "$WORK/color-prompt.commands" -- "${shell[@]}" >>"$FILE"

log term-uv-exact-pin-clean.txt
new_home exact-pin
setup "uv pip install --python $PY torch==2.9.1+cu128 --index-url $CU128"
PROMPT='ubuntu@gpu-box:~$ '
begin term-uv-exact-pin-clean.txt "$COMMON" \
    "torch 2.9.1+cu128 is installed and exactly that is asked for again: nothing to do, and nothing new was asked."
cap "uv pip install --python $PY torch==2.9.1+cu128 --index-url $CU128"
cap "$PY -c \"import torch; print(torch.__version__, torch.version.cuda)\""

log term-uv-reinstall-clean.txt
new_home reinstall
setup "uv pip install --python $PY torch==2.10.0+cu128 --index-url $CU128"
PROMPT='ubuntu@gpu-box:~$ '
begin term-uv-reinstall-clean.txt "$COMMON" \
    "--reinstall with a pinned torch==2.10.0+cu130 switches the build as asked (its dependencies are reinstalled at the same versions: uv's ~ lines)."
cap "uv pip install --python $PY --reinstall torch==2.10.0+cu130 --index-url $CU130"
cap "$PY -c \"import torch; print(torch.__version__); print(torch.version.cuda)\""

log term-pip-warning-clean.txt
new_home pip-warning
setup "$PY -m pip install -q numpy==2.4.2 transformers==4.56.2"
ACTIVE=1
PROMPT='(ml-env) ubuntu@gpu-box:~$ '
begin term-pip-warning-clean.txt "$COMMON" \
    "pip warns that the pinned transformers 4.57.0 is yanked (PEP 592) and installs exactly the pins; numpy==2.4.2 is already there."
cap "pip install transformers==4.57.0 numpy==2.4.2"
cap "python -c \"import transformers, numpy; print(transformers.__version__, numpy.__version__)\""
cap "pip check"

log term-uv-unverified.txt
new_home unverified
setup "uv pip install --python $PY torch==2.9.1+cu128 torchvision==0.24.1+cu128 --index-url $CU128"
PROMPT='ubuntu@gpu-box:~$ '
begin term-uv-unverified.txt "$COMMON" \
    "torch and torchvision are upgraded, then another package goes in; nothing imports torch or checks the env in between or after."
cap "uv pip install --python $PY torch==2.10.0+cu128 torchvision==0.25.0+cu128 --index-url $CU128"
cap "uv pip install --python $PY transformers==4.57.1"

log term-uv-verified-clean.txt
new_home verified
setup "uv pip install --python $PY torch==2.9.1+cu128 torchvision==0.24.1+cu128 --index-url $CU128"
PROMPT='ubuntu@gpu-box:~$ '
begin term-uv-verified-clean.txt "$COMMON" \
    "The same upgrade as term-uv-unverified.txt, checked: torch imports and uv pip check passes."
cap "uv pip install --python $PY torch==2.10.0+cu128 torchvision==0.25.0+cu128 --index-url $CU128"
cap "$PY -c \"import torch; print(torch.__version__)\""
cap "uv pip check --python $PY"

log term-pip-check-conflict-color.txt
new_home check-conflict
setup "$OLD_STACK"
ACTIVE=1
PROMPT='(ml-env) ubuntu@gpu-box:~$ '
begin term-pip-check-conflict-color.txt "$COMMON" \
    "acme-serve (pins torch==2.9.1) installed with --no-deps to keep torch 2.10.0+cu128; pip check and uv pip check (in colour) report the conflict."
cap "pip install --no-deps acme-serve"
cap "pip check"
cap "uv pip check"

log term-uv-noop-color.txt
new_home noop
setup "$OLD_STACK"
ACTIVE=1
PROMPT='(ml-env) ubuntu@gpu-box:~$ '
begin term-uv-noop-color.txt "$COMMON" \
    "uv in a terminal (colour by default) is asked for torch and torchvision from the cu130 index while the cu128 builds are installed."
cap "uv pip install torch torchvision --index-url $CU130"
cap "python -c \"import torch; print(torch.__version__, torch.version.cuda)\""

log term-pip-cpu-torch.txt
new_home cpu-torch
setup "uv pip install --python $PY torch==2.10.0+cu128 --index-url $CU128"
ACTIVE=1
PROMPT='(ml-env) ubuntu@gpu-box:~$ '
begin term-pip-cpu-torch.txt "$COMMON" \
    "acme-serve pins torch==2.9.1; with the CPU index added as an extra index, pip prefers 2.9.1+cpu over the mirror's 2.9.1 and replaces torch 2.10.0+cu128."
cap "pip install acme-serve --extra-index-url $CPU"
cap "python -c \"import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())\""

log term-uv-color-torch-replaced.txt
new_home uv-replaced
setup "uv pip install --python $PY torch torchvision --index-url $NIGHTLY"
ACTIVE=1
PROMPT='(ml-env) ubuntu@gpu-box:~$ '
begin term-uv-color-torch-replaced.txt "$COMMON" \
    "uv in a terminal: acme-serve pins torch==2.9.1 and replaces the cu130 nightly; uv says nothing about torchvision, whose torch==2.12.0.dev20260226 pin is now broken."
cap "uv pip install acme-serve"
cap "python -c \"import torch; print(torch.__version__, torch.version.cuda)\""

log "done: $(ls "$OUT"/term-*.txt | wc -l) files in $OUT"
