#!/usr/bin/env bash
# Re-capture the term-zsh-*.txt and term-fish-*.txt transcripts: real zsh and fish sessions,
# their own prompts, real pip and real wheels (torch 2.13.0+cpu, xformers, torchvision, pandas,
# scipy, numpy), on a host with no GPU.
#
#   sudo bash tests/data/transcripts/capture-prompts.sh [OUTDIR]
#
# Writes term-*.txt into OUTDIR (default: $CAPTURE_WORK/out). Nothing after the `#` header
# lines is written by this script: a real interactive shell draws its own prompts and echoes
# the commands typed on its terminal (one key at a time), and the programs write the rest.
#
# How:
# - The wheels are downloaded once with the caller's pip configuration (PyPI) into
#   $CAPTURE_WORK/wheels, with their dependencies; torch is TORCH_WHEEL (the 2.13.0+cpu wheel
#   of download.pytorch.org/whl/cpu). The sessions install from there only: PIP_NO_INDEX=1 and
#   PIP_FIND_LINKS point pip at that folder, as an offline mirror would.
# - Every session gets a fresh $HOME owned by a user `ubuntu` (created if missing: prompts
#   show `%` and `>` only to a user who is not root), a venv made with `python3 -m venv` (its
#   bundled pip), a clean environment (`env -i`, PATH=/usr/bin:/bin: no CUDA toolkit on it), TERM=xterm-256color, LANG=C.UTF-8, and a
#   host name of its own through `unshare --uts` (root).
# - ptyshell.py types each command once the prompt is drawn, in a pty 200 rows high (120
#   columns; 200 for fish, whose screen is the text kept) with ONLCR off, and keeps the raw bytes. zsh's bytes are kept as they are (colours, bracketed paste,
#   its PROMPT_SP line). fish redraws the command line at every key with cursor moves, which
#   only a terminal emulator can replay: its sessions are the screen a terminal shows, as
#   rendered by pyte (what a user copies from the window and pastes).
#
# Needs: root, zsh, fish, /usr/bin/python3 (3.11, with venv), a pip that can reach PyPI for the
# first run (DL_PYTHON), and pyte (PYTE_PYTHON: a python that can import it).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=${CAPTURE_WORK:-/tmp/capture-prompts}
OUT=${1:-$WORK/out}
# The python of the sessions (and of ptyshell.py) runs as the user: a system one, not a shim
# under root's home. DL_PYTHON (with pip) downloads the wheels.
PYTHON=${PYTHON:-/usr/bin/python3}
DL_PYTHON=${DL_PYTHON:-$(command -v python3)}
PYTE_PYTHON=${PYTE_PYTHON:-$DL_PYTHON}
TORCH_WHEEL=${TORCH_WHEEL:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}
USERNAME_SHOWN=ubuntu

mkdir -p "$WORK/src" "$OUT" "$WORK/homes"
OUT=$(cd "$OUT" && pwd)
log() { printf '== %s\n' "$*" >&2; }

cat > "$WORK/src/ptyshell.py" <<'PY'
"""Drive a real interactive shell in a pseudo-terminal: type each command of a file once the
shell has drawn its prompt, and write the whole session (prompts, the shell's echo, output) raw
to stdout, up to and including the last prompt.

Usage: ptyshell.py [--cols N] [--rows N] [--end REGEX] COMMANDS_FILE -- SHELL_ARGV...
A prompt is taken as drawn when the last line of the output, escape sequences set aside, ends
with a match of --end and the output then stays quiet for a second. ONLCR is off.
"""
import argparse, fcntl, os, pty, re, select, struct, subprocess, sys, termios, time

ap = argparse.ArgumentParser()
ap.add_argument("--cols", type=int, default=120)
ap.add_argument("--rows", type=int, default=200)
ap.add_argument("--timeout", type=float, default=600)
ap.add_argument("--end", default=r"[%>#$] $")
ap.add_argument("commands")
ap.add_argument("argv", nargs=argparse.REMAINDER)
args = ap.parse_args()
argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
commands = [line for line in open(args.commands).read().splitlines() if line.strip()]
END = re.compile(args.end.encode())
ESCAPES = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>]"
    rb"|[\r\x07\x08]"
)

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


def until_prompt(since):
    deadline = time.monotonic() + args.timeout
    quiet = 0.0
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.25)
        if ready:
            out.extend(os.read(master, 65536))
            quiet = 0.0
            continue
        quiet += 0.25
        tail = ESCAPES.sub(b"", bytes(out[since:])).split(b"\n")[-1]
        if quiet >= 1.0 and END.search(tail):
            return
    raise SystemExit("no prompt came back:\n" + out[-2000:].decode(errors="replace"))


until_prompt(0)
for command in commands:
    start = len(out)
    for ch in command.encode():  # typed, one key at a time
        os.write(master, bytes([ch]))
        time.sleep(0.01)
    os.write(master, b"\r")
    until_prompt(start + len(command))
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

cat > "$WORK/src/render.py" <<'PY'
"""The screen a terminal shows for raw pty bytes (stdin): every line of a pyte screen of the
given size that was written to, right-trimmed, up to the last non-empty one.

Usage: render.py COLS ROWS < raw > text
"""
import sys

import pyte

cols, rows = int(sys.argv[1]), int(sys.argv[2])
screen = pyte.Screen(cols, rows)
stream = pyte.ByteStream(screen)
stream.feed(sys.stdin.buffer.read().replace(b"\n", b"\r\n"))  # ONLCR was off: LF alone
lines = [screen.display[row].rstrip() for row in range(rows)]
while lines and not lines[-1]:
    lines.pop()
sys.stdout.write("\n".join(lines) + "\n")
PY

# -- wheels ------------------------------------------------------------------------------------
WHEELS="$WORK/wheels"
if [ ! -e "$WHEELS/.done" ]; then
    log "downloading wheels into $WHEELS"
    mkdir -p "$WHEELS"
    cp "$TORCH_WHEEL" "$WHEELS/"
    "$DL_PYTHON" -m pip download -q -d "$WHEELS" "$TORCH_WHEEL" "numpy==2.2.6"
    "$DL_PYTHON" -m pip download -q -d "$WHEELS" --no-deps "xformers==0.0.28.post3" \
        "torchvision==0.20.1"
    "$DL_PYTHON" -m pip download -q -d "$WHEELS" "pandas==2.1.4"
    "$DL_PYTHON" -m pip download -q -d "$WHEELS" "scipy==1.11.4"
    touch "$WHEELS/.done"
fi
chmod -R a+rX "$WORK"

id "$USERNAME_SHOWN" >/dev/null 2>&1 || useradd -M -U -s /bin/sh -d /nonexistent "$USERNAME_SHOWN"

HOMEDIR=
# new_home NAME: a fresh $HOME owned by the user, with a copy of nothing but what setup adds.
new_home() {
    HOMEDIR="$WORK/homes/$1"
    rm -rf "$HOMEDIR"
    mkdir -p "$HOMEDIR"
    chown "$USERNAME_SHOWN:$USERNAME_SHOWN" "$HOMEDIR"
}

# as_user HOST CMD...: CMD as the user on a host named HOST, in the clean environment of a
# session, from $HOME.
as_user() {
    local host=$1
    shift
    (cd "$HOMEDIR" && unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" \
        env -i HOME="$HOMEDIR" USER="$USERNAME_SHOWN" LOGNAME="$USERNAME_SHOWN" \
        PATH=/usr/bin:/bin TERM=xterm-256color LANG=C.UTF-8 \
        PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INDEX=1 \
        PIP_FIND_LINKS="$WHEELS" \
        setpriv --reuid "$USERNAME_SHOWN" --regid "$USERNAME_SHOWN" --init-groups "$@")
}

# setup CMD: prepare the state before the capture (not shown).
setup() { as_user gpu-box bash -c "$1" >>"$WORK/setup.log" 2>&1; }

# session FILE HOST COLS END COMMANDS HEADER... -- SHELL...: OUT/FILE's header lines, and the
# raw session of SHELL on host HOST in a pty COLS wide in WORK/FILE.raw (END: how its prompt
# ends, see ptyshell.py).
session() {
    local file=$1 host=$2 cols=$3 end=$4 commands=$5
    shift 5
    : >"$OUT/$file"
    while [ "$1" != "--" ]; do printf '# %s\n' "$1" >>"$OUT/$file"; shift; done
    shift
    as_user "$host" "$PYTHON" "$WORK/src/ptyshell.py" --cols "$cols" --end "$end" "$commands" -- "$@" \
        >"$WORK/$file.raw"
}

COMMON="Captured by capture-prompts.sh: a real interactive shell in a pty 200 rows high (120 columns wide; fish's 200) (TERM=xterm-256color) as user ubuntu on a host with no GPU, real pip and real wheels from PyPI (torch is the 2.13.0+cpu wheel of download.pytorch.org/whl/cpu), installed offline from a local folder (PIP_NO_INDEX, PIP_FIND_LINKS)."

# -- zsh, macOS's default prompt: xformers and torchvision built for torch 2.5.1 ----------------
log term-zsh-macos-extension-refusals.txt
new_home zsh-macos
setup "python3 -m venv ml-env && ml-env/bin/pip install -q torch==2.13.0+cpu numpy==2.2.6"
printf '%s\n' 'PS1="%n@%m %1~ %# "' >"$HOMEDIR/.zshrc"  # /etc/zshrc of macOS
chown "$USERNAME_SHOWN:" "$HOMEDIR/.zshrc"
cat >"$WORK/zsh-macos.commands" <<'CMDS'
source ml-env/bin/activate
pip install --no-deps xformers==0.0.28.post3 torchvision==0.20.1
python -c "import xformers.ops"
python -c "import torchvision"
pip check
CMDS
session term-zsh-macos-extension-refusals.txt gpu-box 120 '% $' "$WORK/zsh-macos.commands" "$COMMON" \
    "The shell: zsh 5 with macOS's default PS1 ('%n@%m %1~ %# ', from its /etc/zshrc), raw bytes as the pty gave them. The venv has torch 2.13.0+cpu; xformers 0.0.28.post3 and torchvision 0.20.1 are PyPI's builds for torch 2.5.1, installed with --no-deps." \
    -- env ZDOTDIR="$HOMEDIR" zsh -i
cat "$WORK/term-zsh-macos-extension-refusals.txt.raw" >>"$OUT/term-zsh-macos-extension-refusals.txt"

# -- zsh's own default prompt (host%): the CPU build asked for on a host without a GPU ----------
log term-zsh-host-cpu-torch-asked.txt
new_home zsh-host
cat >"$WORK/zsh-host.commands" <<'CMDS'
nvidia-smi
python3 -m venv cpu-env
source cpu-env/bin/activate
pip install torch==2.13.0+cpu numpy
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())"
CMDS
session term-zsh-host-cpu-torch-asked.txt build-box 120 '% $' "$WORK/zsh-host.commands" "$COMMON" \
    "zsh 5 without any startup file (zsh -f: its default prompt '%m%# '), raw bytes as the pty gave them. The host has no NVIDIA driver; the CPU build of torch is what was asked for (torch==2.13.0+cpu)." \
    -- zsh -f -i
cat "$WORK/term-zsh-host-cpu-torch-asked.txt.raw" >>"$OUT/term-zsh-host-cpu-torch-asked.txt"

# -- zsh with oh-my-zsh's robbyrussell prompt: scipy 1.11 takes numpy back to 1.x ---------------
log term-zsh-robbyrussell-numpy-downgrade.txt
new_home zsh-omz
setup "python3 -m venv ml-env && ml-env/bin/pip install -q numpy==2.2.6"
# The PROMPT of oh-my-zsh's themes/robbyrussell.zsh-theme, without its git part (no repo here).
cat >"$HOMEDIR/.zshrc" <<'RC'
setopt PROMPT_SUBST
PROMPT="%(?:%{%B%F{green}%}➜ :%{%B%F{red}%}➜ ) %{%F{cyan}%}%c%{%b%f%} "
RC
chown "$USERNAME_SHOWN:" "$HOMEDIR/.zshrc"
cat >"$WORK/zsh-omz.commands" <<'CMDS'
source ml-env/bin/activate
pip install scipy==1.11.4
python -c "import numpy, scipy; print(numpy.__version__, scipy.__version__)"
CMDS
session term-zsh-robbyrussell-numpy-downgrade.txt gpu-box 120 '➜  \S+ $' "$WORK/zsh-omz.commands" "$COMMON" \
    "The shell: zsh 5 with the PROMPT of oh-my-zsh's robbyrussell theme ('➜  dir '), raw bytes as the pty gave them. The venv has numpy 2.2.6; scipy 1.11.4 requires numpy<1.28." \
    -- env ZDOTDIR="$HOMEDIR" zsh -i
cat "$WORK/term-zsh-robbyrussell-numpy-downgrade.txt.raw" >>"$OUT/term-zsh-robbyrussell-numpy-downgrade.txt"

# -- fish, its default prompt: numpy upgraded to 2 under pandas 2.1.4 (built for NumPy 1.x) ------
log term-fish-numpy-abi.txt
new_home fish
setup "python3 -m venv ml-env && ml-env/bin/pip install -q pandas==2.1.4"
cat >"$WORK/fish.commands" <<'CMDS'
source ml-env/bin/activate.fish
pip install -U numpy
python -c "import pandas"
CMDS
session term-fish-numpy-abi.txt gpu-box 200 '> $' "$WORK/fish.commands" "$COMMON" \
    "The shell: fish 3.6 with its default prompt ('user@host ~>'); fish redraws the command line at every key with cursor moves, so this is the screen the terminal showed (the pty's bytes replayed by pyte), as a user copies it. The venv has pandas 2.1.4 (its wheel built against NumPy 1.x; it requires numpy<2) with numpy 1.26.4." \
    -- fish -i
"$PYTE_PYTHON" "$WORK/src/render.py" 200 200 <"$WORK/term-fish-numpy-abi.txt.raw" >>"$OUT/term-fish-numpy-abi.txt"

# -- fish: torch with nothing asking for CUDA, on a host without a GPU -------------------------
log term-fish-cpu-torch-unasked.txt
new_home fish-cpu
setup "python3 -m venv ml-env"
cat >"$WORK/fish-cpu.commands" <<'CMDS'
source ml-env/bin/activate.fish
pip install torch numpy
python -m torch.utils.collect_env
CMDS
session term-fish-cpu-torch-unasked.txt laptop 200 '> $' "$WORK/fish-cpu.commands" "$COMMON" \
    "The shell: fish 3.6 with its default prompt ('user@host ~>'); the screen the terminal showed (the pty's bytes replayed by pyte), as a user copies it. The host has no GPU and nothing asks for CUDA: the mirror's torch is the CPU build." \
    -- fish -i
"$PYTE_PYTHON" "$WORK/src/render.py" 200 200 <"$WORK/term-fish-cpu-torch-unasked.txt.raw" >>"$OUT/term-fish-cpu-torch-unasked.txt"

log "wrote $OUT"
