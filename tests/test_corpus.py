"""The transcript corpus (tests/data/transcripts, expectations in expected.toml): real tool
output and verbatim public error lines, each file judged by `journal lint --format json` as a
user runs it. Every expected id must be found and no other raised; clean files stay clean.
bench/corpus.py prints the same comparison as recall and false positives per id."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from tests.helpers import journal, text

CORPUS = Path(__file__).parent / "data" / "transcripts"
EXPECTED = tomllib.loads((CORPUS / "expected.toml").read_text())


@pytest.fixture(scope="module")
def linted() -> dict[str, list[dict]]:
    """Every file of the corpus through one `journal lint --format json` run, by file name."""
    names = sorted(EXPECTED)
    result = journal("lint", "--format", "json", *(str(CORPUS / n) for n in names))
    assert result.returncode in (0, 1), text(result.stderr)
    found: dict[str, list[dict]] = {name: [] for name in names}
    for finding in json.loads(result.stdout)["findings"]:
        found[Path(finding["file"]).name].append(finding)
    return found


def test_the_corpus_is_large_and_every_file_is_described() -> None:
    files = {p.name for p in CORPUS.glob("*.txt")}
    assert files == set(EXPECTED), "every transcript has expectations, and every entry a file"
    assert len(files) >= 40
    assert sum(1 for entry in EXPECTED.values() if not entry["ids"]) >= 10
    for name, entry in EXPECTED.items():
        assert entry["source"].strip() and entry["why"].strip(), name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_lint_finds_what_an_expert_expects(name: str, linted: dict[str, list[dict]]) -> None:
    want = set(EXPECTED[name]["ids"])
    got = {f["id"] for f in linted[name]}
    assert got == want, f"{name}: missed {sorted(want - got)}, unasked {sorted(got - want)}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_evidence_points_at_the_lines_of_the_file(name: str, linted: dict[str, list[dict]]) -> None:
    """Colour codes and redraws are read through, but a line number names the file's own line,
    and the evidence is that line as the terminal showed it."""
    from journal.terminal import clean

    lines = (CORPUS / name).read_bytes().decode("utf-8", "replace").split("\n")
    for finding in linted[name]:
        for ev in finding["evidence"]:
            if ev["line"] is None:
                continue
            shown = clean(lines[ev["line"] - 1]).strip()
            assert ev["text"].strip() == shown, (name, ev)
            assert "\x1b" not in ev["text"] and "\r" not in ev["text"]


#: Files of each class the issue names, replayed as recorded steps.
REPLAYED = [
    "term-uv-color-downgrade.txt",  # colour codes around uv's lines
    "term-uv-crlf.txt",  # CRLF line ends
    "term-pip-color-torch-replaced.txt",  # pip's redraws and colours
    "seed-session-nccl.txt",  # several values on a line
    "h200-nccl-skew-printed.txt",  # facts compared across commands
    "pub-driver-too-old-v100-cross.txt",
    "pub-vllm-collect-env-cu129-driver550.txt",
    "pub-conda-cpu-build-cudatoolkit.txt",  # conda
    "pub-conda-pyg-superseded-cpu.txt",
    "pub-mamba-apex-torch-cpu-downgrade.txt",  # mamba's transaction table
    "h200-clean-repl.txt",  # a >>> session, clean
    "pub-clean-cpu-only-linux-numpy-warning.txt",  # a CPU-only host, clean
]


@pytest.mark.parametrize("name", REPLAYED)
def test_recorded_step_output_is_judged_as_the_transcript(name: str, tmp_path: Path) -> None:
    """Each command of the transcript becomes a step whose recorded output is the command's
    output, byte for byte (`cat` of it; the step's command names what was run, in a here-doc
    that `:` ignores), without package snapshots (this host's packages are not the ones the
    output shows): the journal's findings are the transcript's."""
    from journal.transcript import parse

    raw = (CORPUS / name).read_bytes().decode("utf-8", "replace")
    lines = raw.split("\n")
    commands = parse(clean_text(raw))
    steps = []
    for index, command in enumerate(commands):
        end = commands[index + 1].line - 1 if index + 1 < len(commands) else len(lines)
        output = tmp_path / f"out-{index}.txt"
        output.write_bytes("\n".join(lines[command.line : end]).encode() + b"\n")
        words = command.command.replace("'''", "")
        run = f": <<'RAN'\n{words}\nRAN\ncat {output}"
        steps.append(
            f"[[steps]]\nname = \"cmd-{index + 1}\"\nsnapshots = false\nrun = '''{run}'''\n"
        )
    runbook = tmp_path / "runbook.toml"
    runbook.write_text(
        '[journal]\nname = "replayed"\n\n[hosts.gpu-box]\nssh = "local"\n\n' + "\n".join(steps)
    )
    db = tmp_path / "journal.db"
    done = journal("run", "plan", db=db, runbook=runbook)
    assert done.returncode in (0, 1), text(done.stderr)
    listed = journal("pitfalls", "--all", "--format", "json", db=db, runbook=runbook)
    assert listed.returncode == 0, text(listed.stderr)
    got = {f["id"] for f in json.loads(listed.stdout)["findings"]}
    # unverified-change is judged differently in a journal: from snapshots and probes
    want = set(EXPECTED[name]["ids"]) - {"unverified-change"}
    assert got - {"unverified-change"} == want


def clean_text(raw: str) -> str:
    from journal.terminal import clean

    return clean(raw)
