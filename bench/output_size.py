"""What a step's output size costs: recording and judging it, and the first page of its run.

For each shape, a local step prints the output (its bytes made by `yes | head -c`, so the
printing is no cost of journal's), and each phase runs in a process of its own so that its
peak RSS is its own:

- ``record + judge``: `journal run step` (the output streamed from the supervisor's spool,
  stored as chunks, then the findings judged);
- ``pitfalls``: `journal pitfalls --format json` afterwards, in a fresh process;
- ``first page``: the run's page through the web app's test client, in a fresh process;
- the story's commands: `journal status`, `journal show RUN` (its output's tail), `journal
  show RUN --output` (all of it) and `journal export postmortem`.

- the exports and checks of the record: `journal export cast RUN` (the run's output as an
  asciicast) and `journal verify` (the hash chain over every event).

Shapes: 2 MB and 200 MB of uv-like lines in colour, each line its own (a package and a
version of its own, as a real install's are: identical lines would flatter anything that
keeps what it saw), a single 200 MB line, and a failed install that printed 200 MB on stderr
(the postmortem reads what its installer printed, and the tail of its stderr). Every step
takes its package snapshots before and after, as a runbook's steps do by default.

Then a pasted session of 200 MB (a prompt, an install that printed those lines, a prompt and
torch's version): `journal lint` of it, and `journal import transcript` of it.

Targets (issues 14, 29): peak RSS within 150 MB whatever the output; judging 200 MB within
10 s.

Run: ``.venv/bin/python bench/output_size.py [--keep DIR]`` (a few minutes).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIME = "/usr/bin/time"
RSS_TARGET_MB = 150
JUDGE_TARGET_S = 10.0

#: uv's coloured `+ numpy==2.4.2` lines, each of another package and version (awk counts)
COLOURED = (
    r"""awk 'BEGIN {for (i = 1; ; i++) printf "\033[32m+\033[0m \033[1mpkg-%d\033[0m==2.%d.%d """
    r"""building %d%%\n", i, i % 13, i % 101, i % 100}'"""
)
#: how a step prints what ``make`` makes, ``size`` bytes of it
PRINTS = "{make} | head -c {size}"
#: an install (as the postmortem reads a command) that prints as much on stderr and fails:
#: ``pip`` here is a shell function, nothing is installed
FAILS = (
    "pip() {{ {make} | head -c {size} >&2; echo 'Successfully installed numpy-2.4.2'; "
    "return 1; }}; pip install numpy==2.4.2"
)
SHAPES = {
    "2 MB of coloured lines": (2_000_000, COLOURED, PRINTS),
    "200 MB of coloured lines": (200_000_000, COLOURED, PRINTS),
    "one 200 MB line": (200_000_000, r"yes x | tr -d '\n'", PRINTS),
    "a failed install, 200 MB on stderr": (200_000_000, COLOURED, FAILS),
}

RUNBOOK = """\
[journal]
name = "sizes"

[hosts.here]
ssh = "local"
{steps}"""
STEP = """
[[steps]]
name = "{name}"
run = '''{run}'''
"""


def timed(argv: list[str], cwd: Path) -> tuple[float, float, int]:
    """(wall s, peak RSS MB, exit status) of a command, by /usr/bin/time."""
    stats = cwd / "time.txt"
    done = subprocess.run(
        [TIME, "-f", "%e %M", "-o", str(stats), *argv],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall, kb = stats.read_text().split()[-2:]
    return float(wall), int(kb) / 1024, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="journal-sizes-"))
    folder.mkdir(parents=True, exist_ok=True)
    names = {title: re.sub(r"\W+", "-", title).strip("-") for title in SHAPES}
    steps = "".join(
        STEP.format(name=names[t], run=run.format(make=make, size=size))
        for t, (size, make, run) in SHAPES.items()
    )
    (folder / "runbook.toml").write_text(RUNBOOK.format(steps=steps))
    journal = [sys.executable, "-m", "journal", "--db", "journal.db", "--runbook", "runbook.toml"]
    failed = False
    print(f"targets: peak RSS <= {RSS_TARGET_MB} MB; judging 200 MB <= {JUDGE_TARGET_S:.0f} s")
    for title in SHAPES:
        name = names[title]
        wall, rss, code = timed([*journal, "run", "step", name], folder)
        pit_wall, pit_rss, _ = timed([*journal, "pitfalls", "--format", "json"], folder)
        run = subprocess.run(
            [*journal, "log"], cwd=folder, capture_output=True, text=True, check=True
        ).stdout
        run_id = re.findall(rf"{name} on here.*?run (\w+)", run)[-1]
        page = (
            "from journal.web import create_app; "
            "c = create_app({'DB': 'journal.db', 'TESTING': True}).test_client(); "
            f"r = c.get('/j/sizes/run/{run_id}'); print(r.status_code, len(r.data))"
        )
        web_wall, web_rss, _ = timed([sys.executable, "-c", page], folder)
        # what issue 16 added: the story, one run shown, its output, the postmortem
        story = {
            "journal status": ["status"],
            f"journal show {run_id[:8]}": ["show", run_id],
            "journal show --output": ["show", run_id, "--output"],
            "journal export postmortem": ["export", "postmortem", "-o", "pm.md"],
            "journal export cast": ["export", "cast", run_id, "-o", "run.cast"],
            "journal verify": ["verify"],
        }
        told = {what: timed([*journal, *argv], folder) for what, argv in story.items()}
        over = rss > RSS_TARGET_MB or pit_rss > RSS_TARGET_MB or web_rss > RSS_TARGET_MB
        over |= any(peak > RSS_TARGET_MB for _, peak, _ in told.values())
        failed |= over or code not in (0, 1)
        print(f"\n{title}:")
        print(f"  journal run step (record + judge): {wall:6.2f} s, peak {rss:6.0f} MB")
        print(f"  journal pitfalls, fresh process:   {pit_wall:6.2f} s, peak {pit_rss:6.0f} MB")
        print(f"  first page of the run:             {web_wall:6.2f} s, peak {web_rss:6.0f} MB")
        for what, (t, peak, _) in told.items():
            print(f"  {what + ':':<35}{t:6.2f} s, peak {peak:6.0f} MB")
        print(f"  -> {'OK' if not over else 'OVER TARGET'} (peak RSS <= {RSS_TARGET_MB} MB)")
    failed |= pasted(folder, journal)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


#: A pasted session: an install that printed ``size`` bytes of lines, then torch's version.
SESSION = (
    "{{ echo 'ana@gpu-box:~$ uv pip install -U vllm'; {make} | head -c {size}; echo; "
    "echo 'ana@gpu-box:~$ python -c \"import torch; print(torch.__version__)\"'; "
    "echo '2.9.0+cu128'; }} > session.txt"
)


def pasted(folder: Path, journal: list[str]) -> bool:
    """`journal lint` and `journal import transcript` of a 200 MB session; True if over."""
    size = 200_000_000
    subprocess.run(SESSION.format(make=COLOURED, size=size), shell=True, cwd=folder, check=True)
    told = {
        "journal lint": ["lint", "session.txt"],
        "journal import transcript": ["import", "transcript", "session.txt", "--host", "gpu-box"],
    }
    print(f"\na pasted session of {size // 1_000_000} MB:")
    over = False
    for what, argv in told.items():
        wall, peak, code = timed([*journal, *argv], folder)
        over |= peak > RSS_TARGET_MB or code not in (0, 1)
        print(f"  {what + ':':<35}{wall:6.2f} s, peak {peak:6.0f} MB (exit {code})")
    print(f"  -> {'OK' if not over else 'OVER TARGET'} (peak RSS <= {RSS_TARGET_MB} MB)")
    return over


if __name__ == "__main__":
    sys.exit(main())
