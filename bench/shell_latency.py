"""What `journal shell` adds to each keystroke: the echo round trip of one typed byte through
`journal shell` against bare `ssh -t` to a real sshd on loopback (and, for the local host,
against bare bash in a pseudo-terminal); then, for information, what a whole command costs
(Enter on `true` to the next prompt: the hooks, the run's events, the verdict).

Target (issue 18): under 5 ms added, median. Each sample types one character at the shell's
prompt and waits for readline to echo it back; every 40 characters the line is cleared
(Ctrl-U) and the terminal left to settle, untimed.

Run: ``.venv/bin/python bench/shell_latency.py [--keys N]`` (about ten seconds).
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.sshd import SshHome, SshServer  # noqa: E402
from tests.test_shell import PROMPT, Pty  # noqa: E402

TARGET_MS = 5.0
JOURNAL = [sys.executable, "-m", "journal"]
LINE = 40


def quiet(term: Pty, seconds: float = 0.05) -> None:
    """Read until the terminal has said nothing for ``seconds``."""
    while select.select([term.fd], [], [], seconds)[0]:
        if not os.read(term.fd, 65536):
            return


def keystrokes(term: Pty, keys: int) -> list[float]:
    """Milliseconds from each byte typed to its echo."""
    term.expect(PROMPT)
    quiet(term, 0.3)
    samples = []
    for i in range(keys):
        if i and i % LINE == 0:
            os.write(term.fd, b"\x15")  # Ctrl-U: an empty line again
            quiet(term)
        key = b"abcdefghijklmnopqrstuvwxyz"[i % 26 : i % 26 + 1]
        start = time.perf_counter()
        os.write(term.fd, key)
        got = b""
        while key not in got:
            select.select([term.fd], [], [], 5.0)
            got += os.read(term.fd, 65536)
        samples.append((time.perf_counter() - start) * 1000)
    os.write(term.fd, b"\x15")
    quiet(term)
    return samples


def commands(term: Pty, count: int) -> list[float]:
    """Milliseconds from Enter on `true` to the next prompt (journal: the hooks' marks, the
    run's events, the verdict)."""
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        os.write(term.fd, b"true\r")
        term.expect(PROMPT)
        samples.append((time.perf_counter() - start) * 1000)
    os.write(term.fd, b"exit\r")
    return samples


def figures(name: str, samples: list[float]) -> float:
    samples = sorted(samples)
    median = statistics.median(samples)
    p90 = samples[int(len(samples) * 0.9)]
    print(f"{name:<36} median {median:7.3f} ms   p90 {p90:7.3f} ms   ({len(samples)})")
    return median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=400, help="keystrokes per path")
    parser.add_argument("--commands", type=int, default=30, help="commands per path")
    parser.add_argument(
        "--history",
        type=Path,
        help="a copy of this database is the journal (named 'history', as bench/history.py "
        "makes it: .bench-cache/history-1-100000.db), so that the cost of a long journal shows",
    )
    args = parser.parse_args()
    with SshServer("127.0.0.1") as server, tempfile.TemporaryDirectory() as tmp:
        home = SshHome([server])
        try:
            folder = Path(tmp)
            env = {**home.env(), "TERM": "xterm", "NO_COLOR": "1"}
            rc = folder / "bashrc"
            rc.write_text(f"PS1='{PROMPT.decode()}'\nbind 'set enable-bracketed-paste off'\n")
            runbook = folder / "runbook.toml"
            name = "history" if args.history else "latency"
            runbook.write_text(
                f'[journal]\nname = "{name}"\n\n'
                f'[hosts.ssh]\nssh = "{server.alias}"\nenv = {{ PS1 = "{PROMPT.decode()}" }}\n\n'
                f'[hosts.local]\nssh = "local"\nenv = {{ PS1 = "{PROMPT.decode()}" }}\n'
            )
            db = folder / "journal.db"
            if args.history:
                shutil.copy(args.history, db)
            shell = [*JOURNAL, "--db", str(db), "--runbook", str(runbook), "shell", "--host"]
            bare_ssh = ["ssh", "-F", str(home.config_path), "-tt", server.alias]
            bare_ssh.append(f"exec bash --rcfile {rc} -i")
            runs = {
                "bare ssh -t": bare_ssh,
                "journal shell (ssh)": [*shell, "ssh"],
                "bare bash (local pty)": ["bash", "--rcfile", str(rc), "-i"],
                "journal shell (local)": [*shell, "local"],
            }
            medians = {}
            for name, argv in runs.items():
                term = Pty(argv, env, folder)
                try:
                    medians[name] = figures(name, keystrokes(term, args.keys))
                    figures(f"  a command ({name})", commands(term, args.commands))
                    term.finish()
                finally:
                    term.kill()
        finally:
            home.cleanup()
    ssh_added = medians["journal shell (ssh)"] - medians["bare ssh -t"]
    local_added = medians["journal shell (local)"] - medians["bare bash (local pty)"]
    print(f"added per keystroke over ssh: {ssh_added:+.3f} ms median (target < {TARGET_MS} ms)")
    print(f"added per keystroke locally:  {local_added:+.3f} ms median")
    ok = ssh_added < TARGET_MS
    print("target met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
