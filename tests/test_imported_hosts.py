"""Imported hosts are first-class (issue 16, part 4): a host known only from a pasted terminal
session is listed by `journal status` without a plan it never had, its stack as the transcript
printed it (with the line) is on `journal drift` and the hosts page, figures can be recorded
for it, a probe of it is refused with a reason, and its commands are named and timed from the
transcript itself. Real transcripts, real imports through the command line."""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from journal.runbook import NAME
from journal.store import EventStore
from journal.transcript import NAME_LIMIT, PROMPTS, parse, prompt, step_name
from tests.helpers import journal, text, write_runbook

DATA = Path(__file__).parent / "data" / "transcripts"
STACK_CHECK = DATA / "h200-clean-stack-check.txt"
SEED = DATA / "seed-session.txt"
NCCL_SKEW = DATA / "h200-nccl-skew-printed.txt"

RUNBOOK = f"""[journal]
name = "fleet"

[hosts.local-box]
ssh = "local"
python = "{sys.executable}"

[[steps]]
name = "check-env"
run = '''{sys.executable} -c "print('ok')"'''

[[steps]]
name = "second"
run = "true"
"""


def _ok(*args: str, db: Path, runbook: Path | None = None) -> str:
    done = journal(*args, db=db, runbook=runbook)
    assert done.returncode == 0, text(done.stderr)
    return text(done.stdout)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A journal with a runbook host that ran a step, and gpu-box known only from an import."""
    folder = tmp_path_factory.mktemp("imported")
    db, runbook = folder / "journal.db", write_runbook(folder, RUNBOOK)
    _ok("run", "step", "check-env", db=db, runbook=runbook)
    _ok("import", "transcript", str(STACK_CHECK), "--host", "gpu-box", db=db, runbook=runbook)
    return db, runbook


# -- step names ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (
            "uv pip install torch==2.10.0 --index-url https://download.pytorch.org/whl/cu130",
            "uv-pip-install-torch",
        ),
        ("pip install -U a b", "pip-install-a-b"),
        ('python -c "import torch; print(torch.__version__)"', "python-torch.__version__"),
        (
            "python3 -c \"import torch; print('CUDA:', torch.version.cuda)\"",
            "python3-torch.version.cuda",
        ),
        (
            "python3 -c \"import torch; print(f'torch {torch.__version__}')\"",
            "python3-torch.__version__",
        ),
        ("export X=1", "export-X"),
        ("export CUDA_HOME=/usr/local/cuda PATH=$CUDA_HOME/bin:$PATH", "export-CUDA_HOME-PATH"),
        ("python3 -m torch.utils.collect_env", "python3-torch.utils.collect_env"),
        ("python -m pip install -U pip", "pip-install-pip"),
        ('pip install "numpy<2" flash-attn --no-build-isolation', "pip-install-numpy-flash-attn"),
        ("sudo apt-get install -y cuda-toolkit-13-0", "apt-get-install-cuda-toolkit-13-0"),
        ("nvidia-smi", "nvidia-smi"),
        ("nvcc --version", "nvcc"),
        ("CUDA_VISIBLE_DEVICES=0 python3 train.py --steps 10", "python3-train.py"),
        ("ls -la | grep torch", "ls"),
        ("git commit -m 'pin torch' --all", "git-commit"),  # a command: its first words
        ("echo hello from the shell", "echo-hello-from-the-shell"),  # a message: all of it
        ("echo $HF_TOKEN", "echo"),
    ],
)
def test_imported_steps_are_named_from_their_command(command: str, name: str) -> None:
    assert step_name(command) == name
    assert NAME.match(name)


def test_every_command_of_the_real_transcripts_gets_a_valid_bounded_step_name() -> None:
    seen = set()
    for path in sorted(DATA.glob("*.txt")):
        for command in parse(path.read_text(errors="replace")):
            name = step_name(command.command)
            assert NAME.match(name), (path.name, command.command, name)
            assert len(name) <= NAME_LIMIT
            seen.add(name)
    # the names say what was installed or checked, not only the program
    assert "uv-pip-install-torch-torchvision-torchaudio" in seen
    assert any(name.startswith("python3-torch.") for name in seen)
    long = "pip install " + " ".join(f"package-number-{i}" for i in range(40))
    assert len(step_name(long)) <= NAME_LIMIT and step_name(long).startswith("pip-install-pack")


# -- prompts -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "command", "user", "host"),
    [
        # bash
        ("ubuntu@gpu-box:~/src$ pip install torch", "pip install torch", "ubuntu", "gpu-box"),
        ("root@h200:/# nvidia-smi", "nvidia-smi", "root", "h200"),
        ("[ml@node1 ~]$ ls", "ls", "ml", "node1"),
        ("~$ pyfdax", "pyfdax", None, None),  # \w\$ alone (chipmuenk/pyfda#253)
        ("$ pip list", "pip list", None, None),
        # macOS zsh's default PS1 `%n@%m %1~ %# `, and zsh -f's `%m%# `
        (
            "(base) jdoe@Jdoes-MBP project % python -c 'import torch'",
            "python -c 'import torch'",
            "jdoe",
            "Jdoes-MBP",
        ),
        ("ubuntu@gpu-box ~ % pip check", "pip check", "ubuntu", "gpu-box"),
        ("build-box% nvidia-smi", "nvidia-smi", None, "build-box"),
        ("% pip install torch", "pip install torch", None, None),
        # oh-my-zsh robbyrussell, starship / oh-my-posh
        ("(ml-env) ➜  ~ pip install scipy==1.11.4", "pip install scipy==1.11.4", None, None),
        ("➜  serve git:(main) ✗ python3 bench.py", "python3 bench.py", None, None),
        ("╰─❯ python main.py", "python main.py", None, None),
        # fish's default, with the status of a failed command
        (
            "(ml-env) ubuntu@gpu-box ~> pip install -U numpy",
            "pip install -U numpy",
            "ubuntu",
            "gpu-box",
        ),
        ("ubuntu@gpu-box ~/src [1]> python x.py", "python x.py", "ubuntu", "gpu-box"),
        ("~/src> pip list", "pip list", None, None),
        # Windows cmd (no space before the command) and PowerShell
        (r"(base) C:\Users\Mono>pip3 install torch", "pip3 install torch", None, None),
        (r"A:\Data\DDSP-SVC 3.0>python\python.exe", r"python\python.exe", None, None),
        (r"h:\>pip install torch==1.7.0+cpu", "pip install torch==1.7.0+cpu", None, None),
        (r"(pia) PS E:\PIA> python inference.py", "python inference.py", None, None),
        (
            r"PS C:\Users\bropi\Рабочий стол> python .\collect_env.py",
            r"python .\collect_env.py",
            None,
            None,
        ),
        (r"PS C:\Windows\System32>", "", None, None),
        ("PS /home/ubuntu> pip list", "pip list", None, None),
    ],
)
def test_prompts_of_every_family_give_their_command_user_and_host(
    line: str, command: str, user: str | None, host: str | None
) -> None:
    assert prompt(line) == (command, user, host)


@pytest.mark.parametrize(
    "line",
    [
        ">>> import torch",  # Python
        "... print(x)",
        "100% |████████████████████████████████| 744.5 MB 1.8 MB/s",  # progress bars
        "Downloading torch-2.1.0-cp310-cp310-win_amd64.whl (2619.4 MB) 45%",
        "  % Total    % Received % Xferd  Average Speed   Time",  # curl
        "% Total    % Received % Xferd  Average Speed   Time",
        '<a href="https://download.pytorch.org/whl/cu121/torch">torch</a>',  # HTML, XML
        '<?xml version="1.0" encoding="UTF-8"?>',
        "</root>",
        "numpy 2.2.6 -> 1.26.4",  # arrows
        "a->b",
        "Successfully installed torch-2.1.0+cu121",  # pip
        r"C:\Users\me\lib\site-packages\torch\cuda\__init__.py:52: UserWarning: a -> b",
        r"C:\Users\caitl\.pyenv\pyenv-win\versions\3.11.9\python.exe",
        r"3.11.9 (set by C:\Users\caitl\.pyenv\pyenv-win\version)",
        "~/src> hello world",  # a path and `>` before something that is no command
        "➜  Local:   http://localhost:5173/",  # vite's banner
        "  ❯ Option one",  # an interactive menu
        "❯ Option one",
        "# Out of bounds values : 2 FAILED",  # a comment, not a root prompt
        "    $ conda update -n base -c defaults conda",  # conda's indented hint
        "user@host 100% done",
    ],
)
def test_output_lines_that_look_like_prompts_are_not(line: str) -> None:
    assert prompt(line) is None


def test_every_family_is_tested_with_its_own_example() -> None:
    for family in PROMPTS:
        assert family.example and prompt(family.example) is not None, family.name


def test_a_session_pasted_from_powershell_has_its_commands() -> None:
    """Abe404/root_painter#190 as pasted: its commands, and the lines of output that hold
    Windows paths stay output."""
    text_ = (DATA / "pub-clean-powershell-no-matching-cu124.txt").read_text()
    commands = parse(text_)
    assert [c.command[:14] for c in commands] == [
        "pyenv install ",
        "pyenv global 3",
        "pyenv version",
        'python -c "imp',
        "pip install to",
        "",  # the last prompt, with nothing typed
    ]
    assert commands[3].output == [r"C:\Users\caitl\.pyenv\pyenv-win\versions\3.11.9\python.exe"]


# -- times ---------------------------------------------------------------------------------------


def _stamped(path: Path, stamp: str, step: int = 7) -> str:
    """A real transcript with each prompt line stamped (``stamp`` formats seconds)."""
    out, seconds = [], 12 * 3600
    for line in path.read_text().splitlines():
        if line.startswith(("ubuntu@", "root@")):
            h, rest = divmod(seconds, 3600)
            line = stamp.format(h=h, m=rest // 60, s=rest % 60) + line
            seconds += step
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    "stamp",
    [
        "[{h:02d}:{m:02d}:{s:02d}] ",
        "{h:02d}:{m:02d}:{s:02d} ",
        "[2026-12-01 {h:02d}:{m:02d}:{s:02d}] ",
    ],
)
def test_prompt_times_time_the_commands(stamp: str) -> None:
    plain = parse(SEED.read_text())
    timed = parse(_stamped(SEED, stamp))
    assert [c.command for c in timed] == [c.command for c in plain]
    assert [c.output for c in timed] == [c.output for c in plain]
    assert all(c.at is not None for c in timed)
    assert [c.duration for c in timed[:-1]] == [7.0] * (len(timed) - 1)
    assert timed[-1].duration is None  # nothing after the last prompt says when it ended
    assert all(c.at is None and c.duration is None for c in plain)


def test_ts_stamps_on_every_line_and_a_script_header_time_across_midnight() -> None:
    ts = "Dec 01 12:00:00 $ echo hi\nDec 01 12:00:00 hi\n"
    ts += "Dec 01 12:00:04 $ sleep 3\nDec 01 12:00:07 done\n"
    first, second = parse(ts)
    assert (first.output, first.duration) == (["hi"], 4.0)
    assert (second.output, second.duration) == (["done"], 3.0)
    script = (
        "Script started on 2026-12-01 23:59:50+00:00 [COMMAND=bash]\n"
        "[23:59:58] u@gpu-box:~$ nvidia-smi\nout\n[00:00:03] u@gpu-box:~$ ls\nx\n"
        "Script done on 2026-12-02 00:00:09+00:00 [COMMAND_EXIT_CODE=0]\n"
    )
    first, second = parse(script)
    assert (first.duration, second.duration, second.output) == (5.0, 6.0, ["x"])
    # a line of output that happens to start with a time is output, not a stamp
    (only,) = parse("$ date +%T\n12:00:01 is the time\n")
    assert only.output == ["12:00:01 is the time"] and only.at is None


def test_an_import_is_timed_from_the_transcript_else_untimed(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    timed = tmp_path / "timed.txt"
    timed.write_text(_stamped(SEED, "[{h:02d}:{m:02d}:{s:02d}] "))
    _ok("--journal", "by-hand", "import", "transcript", str(timed), "--host", "gpu-box", db=db)
    _ok("--journal", "plain", "import", "transcript", str(SEED), "--host", "gpu-box", db=db)
    store = EventStore(str(db))
    try:
        ends = [r.event for r in store.read("by-hand", types=["StepFinished"])]
        plain = [r.event for r in store.read("plain", types=["StepFinished"])]
    finally:
        store.close()
    assert [e.duration for e in ends] == [7.0] * (len(ends) - 1) + [None]
    assert "at 12:00:00" in (ends[0].reason or "")
    assert all(e.duration is None and "(untimed)" in (e.reason or "") for e in plain)
    shown = _ok("--journal", "plain", "log", db=db)
    assert "0.00s" not in shown and "(untimed)" in shown
    assert "imported untimed" in shown  # in the run line itself, not only its reason


def _stamp(ts: str, shift: timedelta, zone: timedelta) -> str:
    """A stored time moved by ``shift``, as a transcript in a zone ``zone`` east of UTC prints
    it (``2026-12-01 12:01:33.250000``)."""
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00")) + shift + zone
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _web(db: Path) -> FlaskClient:
    from journal.web import create_app

    return create_app({"DB": str(db), "TESTING": True}).test_client()


def _order_on_the_web(client: FlaskClient, journal_name: str) -> list[str]:
    response = client.get(f"/j/{journal_name}")
    assert response.status_code == 200
    return re.findall(r'<a class="step" href="[^"]*">([^<]+)</a>', response.get_data(as_text=True))


def test_dated_imported_commands_stand_among_the_local_steps_by_their_time(tmp_path: Path) -> None:
    """A transcript that dates its prompts places its commands by their own time, among the
    steps run here, on `journal log` (the stored timeline folded on, and folded anew) and the
    web timeline; an undated transcript's commands stay where the import was made."""
    folder = tmp_path / "placed"
    folder.mkdir()
    db, runbook = folder / "journal.db", write_runbook(folder, RUNBOOK)
    env = {**os.environ, "TZ": "IST-5:30"}  # the transcript's times are of the importer's zone
    zone = timedelta(hours=5, minutes=30)
    for step in ("check-env", "second"):
        assert journal("run", "step", step, db=db, runbook=runbook, env=env).returncode == 0
    before = _ok("log", db=db, runbook=runbook)  # the stored timeline, folded on below
    served = _web(db)  # a server that has folded the journal so far, and folds on
    assert _order_on_the_web(served, "fleet") == ["check-env", "second"]
    store = EventStore(str(db))
    try:
        starts = {r.event.step: r.ts for r in store.read("fleet", types=["StepStarted"])}
        (first_end, _) = [r.ts for r in store.read("fleet", types=["StepFinished"])]
    finally:
        store.close()
    gap = datetime.fromisoformat(starts["second"][:-1]) - datetime.fromisoformat(first_end[:-1])
    early, middle = "nvidia-smi", "uv pip install torch==2.11.0"
    dated = folder / "dated.txt"
    dated.write_text(
        f"[{_stamp(starts['check-env'], -timedelta(hours=1), zone)}] ubuntu@gpu-box:~$ {early}\n"
        "| NVIDIA-SMI 580.159.04 |\n"
        f"[{_stamp(first_end, gap / 2, zone)}] ubuntu@gpu-box:~$ {middle}\n"
        "Resolved 1 package\n"
    )
    undated = folder / "undated.txt"
    undated.write_text("ubuntu@gpu-box:~$ ldconfig -p\n42 libs found\n")
    for path in (dated, undated):
        done = journal("import", "transcript", str(path), "--host", "gpu-box", db=db,
                       runbook=runbook, env=env)  # fmt: skip
        assert done.returncode == 0, text(done.stderr)
    want = [step_name(early), "check-env", step_name(middle), "second", step_name("ldconfig -p")]

    shown = _ok("log", db=db, runbook=runbook)
    headings = re.findall(r"^\S+ \S+Z  \[[^]]+\] (\S+) on ", shown, re.M)
    assert headings == want[::-1], shown  # newest first
    # the early command says its own time (an hour before check-env), not the import's
    (early_line,) = [line for line in shown.splitlines() if f"] {want[0]} on" in line]
    hour_before = datetime.fromisoformat(starts["check-env"][:-1]) - timedelta(hours=1)
    assert early_line.startswith(hour_before.strftime("%Y-%m-%d %H:%M:%S") + "Z")
    assert "check-env on local-box" in before  # the log before the import, stored then
    assert _ok("log", db=db, runbook=runbook) == shown  # read back from the stored timeline
    _ok("rebuild", db=db, runbook=runbook)
    assert _ok("log", db=db, runbook=runbook) == shown  # the same when folded anew
    assert _order_on_the_web(served, "fleet") == want
    assert _order_on_the_web(_web(db), "fleet") == want  # a server started now


# -- status, drift, metrics, probes --------------------------------------------------------------


def test_status_lists_an_imported_host_without_the_plan(fleet: tuple[Path, Path]) -> None:
    db, runbook = fleet
    shown = _ok("status", db=db, runbook=runbook)
    assert "gpu-box: pending" not in shown and "host gpu-box (imported): 7 commands, last" in shown
    assert "no plan (not in the runbook)" in shown
    assert re.search(r"read from a transcript: torch 2\.11\.0\S*, torch CUDA 13\.0, NCCL", shown)
    assert "host local-box (local): 1/2 steps done" in shown


def test_drift_reads_the_transcript_with_its_lines(fleet: tuple[Path, Path]) -> None:
    db, runbook = fleet
    shown = _ok("drift", db=db, runbook=runbook)
    assert "no drift" not in shown  # local-box has no torch-env reading: nothing to compare
    assert "nothing to compare" in shown and "read from an imported transcript" in shown
    assert re.search(r"NCCL \(torch\)\s+2\.28\.9\s+unread\s+2\.28\.9", shown)
    data = json.loads(_ok("drift", "--format", "json", db=db, runbook=runbook))
    rows = {row["key"]: row["values"]["gpu-box"] for row in data["groups"][0]["rows"]}
    nccl = rows["nccl"]
    assert nccl["read"]["kind"] == "transcript"
    lines = STACK_CHECK.read_text().splitlines()
    line = int(re.search(r"line (\d+)", nccl["note"]).group(1))
    assert "(2, 28, 9)" in lines[line - 1] and lines[line - 1] in nccl["note"]
    assert rows["driver"]["value"] == "580.159.04"


def test_drift_of_one_host_read_says_there_is_nothing_to_compare(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    _ok("--journal", "one", "import", "transcript", str(STACK_CHECK), "--host", "gpu-box", db=db)
    shown = _ok("--journal", "one", "drift", db=db)
    assert "only one host read (gpu-box): nothing to compare" in shown
    assert "no drift" not in shown.lower()
    # a second host's transcript, with another NCCL: now there is something to compare
    _ok("--journal", "one", "import", "transcript", str(NCCL_SKEW), "--host", "h2", db=db)
    both = journal("--journal", "one", "drift", db=db)
    out = text(both.stdout)
    assert "only one host read" not in out and "h2" in out


def test_a_metric_can_be_recorded_for_an_imported_host(fleet: tuple[Path, Path]) -> None:
    db, runbook = fleet
    shown = _ok("record", "metric", "tok_s", "51.2", "--host", "gpu-box", db=db, runbook=runbook)
    assert "on gpu-box" in shown
    typo = journal("record", "metric", "tok_s", "1", "--host", "gpu-bx", db=db, runbook=runbook)
    assert typo.returncode == 2 and "did you mean 'gpu-box'" in text(typo.stderr)


def test_an_imported_host_cannot_be_probed_and_says_why(fleet: tuple[Path, Path]) -> None:
    db, runbook = fleet
    refused = journal("run", "probe", "torch-env", "--host", "gpu-box", db=db, runbook=runbook)
    err = text(refused.stderr)
    assert refused.returncode == 2 and "Traceback" not in err
    assert "known only from an imported transcript" in err and "[hosts.gpu-box]" in err
    unknown = journal("run", "probe", "torch-env", "--host", "nope", db=db, runbook=runbook)
    assert unknown.returncode == 2 and "no host named 'nope'" in text(unknown.stderr)


def test_the_hosts_page_shows_what_the_transcript_printed(fleet: tuple[Path, Path]) -> None:
    from journal.web import create_app

    db, _ = fleet
    client = create_app({"DB": str(db), "TESTING": True}).test_client()
    response = client.get("/j/fleet/hosts")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert "read from a transcript" in html and "2.28.9" in html
    assert "torch 2.11.0+cu130 cuda 13.0 nccl (2, 28, 9)" in html  # the line, as evidence
    assert "No drift" not in html and "nothing to compare" in html


def test_an_imported_host_keeps_what_an_early_transcript_printed_after_many_later_ones(
    tmp_path: Path,
) -> None:
    """A year of pasted sessions: the driver and NCCL printed once, early, still stand on
    `journal status` after 40 later sessions that printed only torch (each key's latest)."""
    db, runbook = tmp_path / "journal.db", write_runbook(tmp_path, RUNBOOK)
    _ok("import", "transcript", str(STACK_CHECK), "--host", "gpu-box", db=db, runbook=runbook)
    later = tmp_path / "later.txt"
    for day in range(40):
        later.write_text(
            "ubuntu@gpu-box:~$ python3 -c \"import torch; print('torch:', torch.__version__)\"\n"
            f"torch: 2.12.0.dev202602{day % 28 + 1:02d}+cu130\n"
        )
        _ok("import", "transcript", str(later), "--host", "gpu-box", db=db, runbook=runbook)
    data = json.loads(_ok("status", "--format", "json", db=db, runbook=runbook))
    (host,) = [h for h in data["imported_hosts"] if h["host"] == "gpu-box"]
    reading = next(v for v in host.values() if isinstance(v, dict) and "evidence" in v)
    assert reading["driver"] == "580.159.04" and reading["nccl"] == "2.28.9"  # the first's
    assert reading["torch"]["version"] == "2.12.0.dev20260212+cu130"  # the latest torch
    assert reading["evidence"]["torch.version"]["line"] == 2
    assert host["commands"] == 40 + len(parse(STACK_CHECK.read_text()))


def test_where_an_imported_command_came_from_reads_as_provenance_not_an_error(
    tmp_path: Path,
) -> None:
    """An imported run says which file and line it came from, muted as the rest of its
    provenance, not in the colour of a failure."""
    db, runbook = tmp_path / "journal.db", write_runbook(tmp_path, RUNBOOK)
    pasted = tmp_path / "session.txt"
    pasted.write_text("ubuntu@gpu-box:~$ nvidia-smi\n| NVIDIA-SMI 580.159.04 |\n")
    done = journal("import", "transcript", str(pasted), "--host", "gpu-box", db=db, runbook=runbook)
    assert done.returncode == 0, text(done.stderr)
    client = _web(db)
    page = client.get("/j/fleet").get_data(as_text=True)
    (told,) = re.findall(r'<p class="([^"]*)">imported from session\.txt, line 1', page)
    assert told == "reason imported"
    run = re.search(r'<a class="step" href="([^"]*)">nvidia-smi</a>', page)
    assert run is not None
    shown = client.get(run.group(1)).get_data(as_text=True)
    assert '<p class="reason imported">imported from session.txt, line 1' in shown
    with client.get("/static/journal.css") as response:
        css = response.get_data(as_text=True)
    assert ".imported .reason, .reason.imported { color: var(--muted); }" in css


def test_what_a_transcript_printed_of_the_stack_reads_as_a_sentence(tmp_path: Path) -> None:
    """A real H200 session that printed its stack: the reading the import records is told as
    torch-env's is (torch, CUDA, driver, GPUs, nvcc, with the lines it came from), never as a
    JSON dump, on `journal log` and the web timeline."""
    db, runbook = tmp_path / "journal.db", write_runbook(tmp_path, RUNBOOK)
    session = Path(__file__).parent / "data" / "transcripts" / "h200-clean-stack-check.txt"
    done = journal(
        "import", "transcript", str(session), "--host", "gpu-box", db=db, runbook=runbook
    )
    assert done.returncode == 0, text(done.stderr)
    logged = _ok("log", db=db, runbook=runbook)
    told = "\n".join(line for line in logged.splitlines() if "probe transcript: " in line)
    for said in ("torch 2.11.0+cu130 (CUDA 13.0)", "driver 580.159.04 (CUDA 13.0), line 6"):
        assert said in told, told
    assert "NVIDIA H200, lines 31, 32" in told and "nvcc 13.0, line 28" in told
    assert "{" not in told and "evidence" not in told
    page = _web(db).get("/j/fleet").get_data(as_text=True)
    assert "torch 2.11.0+cu130 (CUDA 13.0)" in page and "evidence=" not in page
