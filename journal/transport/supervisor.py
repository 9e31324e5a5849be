"""The supervisor a step's command runs under on its host, in POSIX shell and its tools only
(nothing is installed on the host), so that the command outlives a recorder that dies.

Each step run has a folder on its host, ``~/.journal/runs/RUN``:

- ``script``: the command with its env and folder, as journal sent it (it removes itself
  as the command starts: the env's values are never in a process's argv);
- ``out`` and ``err``: what it prints, spooled byte for byte;
- ``pid``: the process group of the command (it runs in a session of its own);
- ``rc``: its exit status and the time it ended (seconds since the epoch), then ``full``
  when the host's disk was full as it ended (its output may be cut short), written (whole,
  by a rename, into room made at launch) when it ends.

:func:`launch` starts it detached from journal's session: a supervisor shell in a new
session starts the command in another, waits for it and writes ``rc``. Signals for stopping
go to the command's group alone (:func:`signal_group`), so the supervisor lives to write the
status. :func:`follow` is the loop that streams the spool from given offsets, framed: a
header line ``out N`` / ``err N`` then N bytes, and at the end ``rc CODE``; journal reads it
on the host (local files, or an SSH channel) from where its record stands, which is how a
lost run is reattached without a byte twice or missing. Once journal has recorded it all it
answers ``ok``, and the loop removes the folder; a journal that dies first leaves it there.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

#: Where the runs' folders are on a host (relative to its $HOME).
RUNS = ".journal/runs"
#: How often the follow loop looks at the spool (live output stays within 200 ms).
FOLLOW_S = 0.05

_RUN_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
#: Newlines written at launch where ``pid`` and ``rc`` will be: the supervisor writes them in
#: place (``1<>``, no block to allocate), so a disk that fills up while the command runs cannot
#: keep them from being written (journal would wait for ``rc`` forever); ``$(cat)`` and
#: ``split()`` drop the newlines left over.
_ROOM = "printf '" + "\\n" * 32 + "'"


def folder(run_id: str) -> str:
    """The run's folder, as a shell word (``"$HOME"/.journal/runs/RUN``)."""
    if not _RUN_ID.match(run_id):
        raise ValueError(f"not a run id: {run_id!r}")
    return f'"$HOME"/{RUNS}/{run_id}'


def launch(run_id: str, size: int | None = None) -> str:
    """The shell that starts the run's ``script`` (read from its standard input) under the
    supervisor, detached, and returns once the command's process group is written down.

    The supervisor is a bash (sh where there is none) in a session of its own (``setsid
    -f``: not a background job of the launching shell, which would make it ignore SIGINT);
    with job control on (``set -m``) it starts the command as a job in a process group of its
    own, with no signal ignored, waits for it and writes its status (128 + N when a signal
    ended it). Signals for stopping go to the command's group, so the supervisor lives on to
    write ``rc``."""
    d = folder(run_id)
    # A disk full when the command ends may have cut its output short: ``full`` says so. The
    # supervisor holds the script open (fd 3, not the command's) until it has looked, so the
    # space the script took (freed once it is removed and closed) does not hide a full disk.
    supervise = (
        'set -m; d=$1; exec 3< "$d/script"; '
        '"$2" "$d/script" 3<&- > "$d/out" 2> "$d/err" < /dev/null & p=$!; '
        'printf %s $p 1<> "$d/pid.tmp" && mv "$d/pid.tmp" "$d/pid"; '
        'wait $p; s=$?; f=; { printf x > "$d/room"; } 2> /dev/null || f=" full"; '
        'exec 3<&-; rm -f "$d/room"; '
        'printf "%s %s%s" $s "$(date +%s)" "$f" 1<> "$d/rc.tmp" && mv "$d/rc.tmp" "$d/rc"'
    )
    start = f'{shlex.quote(supervise)} supervisor "$d" "$b" > /dev/null 2>&1 < /dev/null'
    script = "cat" if size is None else f"head -c {int(size)}"
    return "\n".join(
        [
            f"d={d}",
            "umask 077",
            # the run's folder; its script, the first ``size`` bytes of stdin (the rest is the
            # follow loop's), which holds the step's env, so it is the owner's alone and
            # removes itself as it starts (no value of it is in any process's argv, nor on
            # disk while it runs); and the room ``pid`` and ``rc`` are written into. Where
            # that cannot be written (a full disk), the host says why in C's words and the
            # folder goes.
            f'if ! (export LC_ALL=C; mkdir -p -m 700 "$d" && '
            f'{{ printf \'rm -f -- "$0"\\n\'; {script}; }} > "$d/script" && '
            f'{_ROOM} > "$d/pid.tmp" && {_ROOM} > "$d/rc.tmp"); then rm -rf "$d"; exit 111; fi',
            "b=$(command -v bash) || b=sh",
            f'if setsid -f true 2>/dev/null; then setsid -f "$b" -c {start}; '
            f'else setsid "$b" -c {start} & fi',
            # the command's group once it is known (the supervisor writes it at once)
            'i=0; while [ ! -s "$d/pid" ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done',
            'printf "pid %s\\n" "$(cat "$d/pid" 2>/dev/null)"; [ -s "$d/pid" ] || exit 111',
        ]
    )


def launch_and_follow(run_id: str, size: int) -> str:
    """:func:`launch` (the script being the first ``size`` bytes of stdin) then, on the same
    channel, :func:`follow` from the first byte: one round trip for a step over SSH."""
    return launch(run_id, size) + "\n" + follow(run_id)


def follow(run_id: str, out: int = 0, err: int = 0) -> str:
    """The shell loop that streams the run's spool from byte ``out`` of its stdout and ``err``
    of its stderr, framed (``out N`` / ``err N`` then N bytes), until ``rc CODE``;
    ``gone`` when the run's folder is not there."""
    d = folder(run_id)
    return "\n".join(
        [
            f"d={d}; o={int(out)}; e={int(err)}",
            '[ -d "$d" ] || { echo gone; exit 0; }',
            "send() {",
            '  n=$(wc -c < "$d/$1" 2>/dev/null || echo 0); n=$((n))',
            '  if [ "$n" -gt "$2" ]; then',
            '    printf "%s %s\\n" "$1" $((n-$2))',
            '    tail -c +$(($2+1)) "$d/$1" | head -c $((n-$2))',
            "  fi",
            "  got=$n",
            "}",
            # a short command ends within the first quick looks; a long one is looked at
            # every FOLLOW_S
            "n=0; while :; do",
            '  done=0; [ -e "$d/rc" ] && done=1',
            '  send out "$o"; o=$got; send err "$e"; e=$got',
            "  if [ $done = 1 ]; then",
            '    printf "rc %s\\n" "$(cat "$d/rc")"',
            # journal says `ok` once all of it is recorded: only then is the spool removed
            '    read -r ack && [ "$ack" = ok ] && rm -rf "$d"',
            "    exit 0",
            "  fi",
            f"  if [ $n -lt 20 ]; then n=$((n+1)); sleep 0.01; else sleep {FOLLOW_S}; fi",
            "done",
        ]
    )


def signal_group(run_id: str, name: str) -> str:
    """The shell that sends SIG``name`` to the run's command's process group."""
    return f'pg=$(cat {folder(run_id)}/pid 2>/dev/null) && kill -{name} -- -"$pg" 2>/dev/null'


class Frames:
    """Reads the follow loop's framed stream: feed it bytes as they come, take the pieces of
    each frame as they arrive (a big frame is never held whole)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._left: tuple[str, int] | None = None  # the frame being read: stream, bytes due
        self.rc: int | None = None
        self.gone = False
        self.pid: int | None = None
        self.ended: float | None = None
        #: the host's disk was full when the command ended: its spool may be cut short
        self.full = False

    def feed(self, data: bytes) -> Iterator[tuple[str, bytes]]:
        """The (stream, bytes) pieces ``data`` completes; ``rc`` / ``gone`` once seen."""
        self._buf += data
        while self._buf:
            if self._left is not None:
                stream, due = self._left
                piece = bytes(self._buf[:due])
                del self._buf[: len(piece)]
                due -= len(piece)
                self._left = (stream, due) if due else None
                yield stream, piece
                continue
            end = self._buf.find(b"\n")
            if end < 0:
                return
            header = self._buf[:end].decode("ascii", "replace").split()
            del self._buf[: end + 1]
            if len(header) == 2 and header[0] in ("out", "err") and header[1].isdigit():
                if int(header[1]):
                    self._left = ("stdout" if header[0] == "out" else "stderr", int(header[1]))
            elif len(header) >= 2 and header[0] == "rc":
                self.rc = int(header[1]) if header[1].lstrip("-").isdigit() else None
                if len(header) >= 3 and header[2].isdigit():
                    self.ended = float(header[2])
                self.full = "full" in header[3:]
            elif len(header) == 2 and header[0] == "pid" and header[1].isdigit():
                self.pid = int(header[1])
            elif header == ["gone"]:
                self.gone = True
