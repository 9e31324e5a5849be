"""The docs keep up with the code: every command and flag on its family's page of docs/, every
event type and its fields in docs/events.md, every pitfall id in docs/pitfalls.md, every key of
the runbook in docs/runbook.md, and every relative link of the Markdown files resolving (as
datasette's test_docs does, but against the page a reader looks on, not any mention)."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from journal.cli import build_parser
from journal.events import EVENT_TYPES
from journal.pitfalls import catalogue

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MARKDOWN = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "CONTRIBUTING.md"] + sorted(
    DOCS.glob("*.md")
)

#: Each command family's page, and the commands it documents (a new command goes on one).
FAMILIES = {
    "ansible.md": ("journal ansible plugin-path",),
    "cli-running.md": (
        "journal init",
        "journal demo",
        "journal run step",
        "journal run plan",
        "journal run probe",
        "journal attach",
    ),
    "cli-reading.md": (
        "journal status",
        "journal log",
        "journal show",
        "journal note",
        "journal drift",
    ),
    "cli-findings.md": (
        "journal pitfalls",
        "journal pitfalls ack",
        "journal pitfalls unack",
        "journal lint",
        "journal import transcript",
    ),
    "cli-bench.md": ("journal run bench", "journal record metric"),
    "cli-rollback.md": ("journal rollback",),
    "cli-shell.md": ("journal shell",),
    "cli-export.md": ("journal export postmortem", "journal export cast"),
    "web.md": ("journal serve",),
    "operations.md": (
        "journal verify",
        "journal anchor",
        "journal rebuild",
        "journal db copy",
        "journal notify test",
    ),
}

#: Options every command takes, documented once in docs/README.md.
GLOBAL = ("--db", "--runbook", "--journal")


def commands(
    parser: argparse.ArgumentParser, prefix: str = "journal"
) -> dict[str, argparse.ArgumentParser]:
    """Every command a user can run, by its whole name: one with a function behind it, or with
    no subcommands of its own (`journal pitfalls` and its `ack`, not `journal run`)."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = commands(sub, f"{prefix} {name}")
                if sub.get_default("func") is not None or not nested:
                    found[f"{prefix} {name}"] = sub
                found.update(nested)
    return found


def options(parser: argparse.ArgumentParser) -> list[str]:
    """A command's own option strings (its flags), the global ones, --help and the old names
    it still takes unlisted (``show --output``, now ``--full-output``) aside."""
    return [
        option
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for option in action.option_strings
        if option not in ("-h", "--help", *GLOBAL)
    ]


def headings(text: str) -> list[tuple[int, int, str]]:
    """(line index, level, text) of every Markdown heading outside fenced code."""
    found, fenced = [], False
    for i, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"(#{1,6}) (.*)", line)):
            found.append((i, len(m.group(1)), m.group(2)))
    return found


def section(text: str, command: str) -> str | None:
    """The section of ``text`` under the heading that names ``command`` in a code span
    (`` `journal run step NAME` ``, not `` `journal run step-x` `` nor a subcommand of it)."""
    lines = text.splitlines()
    marks = headings(text)
    words = command.split()
    for n, (at, level, title) in enumerate(marks):
        for span in re.findall(r"`([^`]+)`", title):
            tokens = span.split()
            if tokens[: len(words)] != words:
                continue
            if len(tokens) > len(words) and re.fullmatch(r"[a-z][a-z-]*", tokens[len(words)]):
                continue  # a subcommand's heading: `journal pitfalls ack` is not `pitfalls`
            end = next((i for i, lv, _ in marks[n + 1 :] if lv <= level), len(lines))
            return "\n".join(lines[at:end])
    return None


def mentions(text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def test_every_command_has_a_family_page() -> None:
    names = set(commands(build_parser()))
    assert {"journal run step", "journal verify", "journal pitfalls ack"} <= names
    placed = [name for family in FAMILIES.values() for name in family]
    assert len(placed) == len(set(placed)), "a command is listed on two pages"
    assert sorted(names - set(placed)) == [], (
        "new commands: document each under a heading of its family's page in docs/ and list "
        "it in FAMILIES"
    )
    assert sorted(set(placed) - names) == [], "FAMILIES lists commands the parser lacks"


@pytest.mark.parametrize("page", sorted(FAMILIES))
def test_every_command_and_flag_is_on_its_family_page(page: str) -> None:
    text = (DOCS / page).read_text()
    parsers = commands(build_parser())
    missing = []
    for name in FAMILIES[page]:
        under = section(text, name)
        if under is None:
            missing.append(f"{name}: no heading naming it")
            continue
        missing.extend(f"{name} {o}" for o in options(parsers[name]) if not mentions(under, o))
    assert missing == [], f"docs/{page} lacks them under their command's heading"


def test_the_global_options_are_on_the_index() -> None:
    under = section_titled((DOCS / "README.md").read_text(), "Global options")
    parser = build_parser()
    found = {o for a in parser._actions for o in a.option_strings}
    assert set(GLOBAL) <= found
    assert [o for o in GLOBAL if not mentions(under, o)] == []


def section_titled(text: str, title: str) -> str:
    lines = text.splitlines()
    marks = headings(text)
    for n, (at, level, name) in enumerate(marks):
        if name == title:
            end = next((i for i, lv, _ in marks[n + 1 :] if lv <= level), len(lines))
            return "\n".join(lines[at:end])
    raise AssertionError(f"no section {title!r}")


def test_every_event_type_and_its_fields_are_in_the_events_page() -> None:
    text = (DOCS / "events.md").read_text()
    titled = {t.strip("`") for _, _, t in headings(text) if re.fullmatch(r"`[A-Z]\w+`", t)}
    assert titled == set(EVENT_TYPES), "docs/events.md: a heading per event type, no other"
    for name, cls in EVENT_TYPES.items():
        assert cls.__doc__ and len(cls.__doc__.split()) > 5, name
        assert f"| `{name}` |" in text, f"{name} is not in the table of docs/events.md"
        under = section_titled(text, f"`{name}`")
        missing = [f.name for f in dataclasses.fields(cls) if f"`{f.name}`" not in under]
        assert missing == [], f"docs/events.md, {name}: fields not documented"


def test_every_pitfall_id_is_in_the_catalogue_page() -> None:
    text = (DOCS / "pitfalls.md").read_text()
    ids = re.findall(r"^#### `([a-z0-9-]+)`$", text, re.M)
    assert sorted(ids) == sorted(catalogue()) and len(ids) >= 20


def test_every_runbook_key_is_on_the_runbook_page() -> None:
    from journal.runbook import JOURNAL_KEYS, TOP_KEYS
    from journal.runbook.benchmarks import BENCH_KEYS
    from journal.runbook.hosts import HOST_KEYS
    from journal.runbook.notify import NOTIFY_KEYS
    from journal.runbook.probes import PROBE_KEYS
    from journal.runbook.steps import STEP_KEYS

    text = (DOCS / "runbook.md").read_text()
    tables = {
        "[journal]": JOURNAL_KEYS,
        "[hosts.NAME]": HOST_KEYS,
        "[[steps]]": STEP_KEYS,
        "[probes.NAME]": PROBE_KEYS,
        "[benchmarks.NAME]": BENCH_KEYS,
        "[notify.NAME]": NOTIFY_KEYS,
    }
    for top in TOP_KEYS:
        assert re.search(rf"^### `\[*{top}[].]", text, re.M), f"no section for [{top}]"
    for table, keys in tables.items():
        under = section_titled(text, f"`{table}`")
        missing = sorted(k for k in keys if f"`{k}`" not in under)
        assert missing == [], f"docs/runbook.md, {table}: keys not documented"


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def slug(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as '-'."""
    text = re.sub(r"[^\w\- ]", "", title.lower())
    return text.replace(" ", "-")


def links(path: Path) -> list[str]:
    text, fenced, found = path.read_text(), False, []
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            found.extend(LINK.findall(re.sub(r"`[^`]*`", "", line)))
    return found


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, _, title in headings(path.read_text()):
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for target in links(path):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not ours to check here
        file, _, fragment = target.partition("#")
        where = (path.parent / file).resolve() if file else path
        if not where.is_relative_to(ROOT) or "shared" in where.relative_to(ROOT).parts[:1]:
            broken.append(f"{target} (outside the project)")
        elif not where.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and where.suffix == ".md" and fragment not in anchors(where):
            broken.append(f"{target} (no such heading)")
    assert broken == []


def test_the_readme_links_every_docs_page() -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md")}
    pages = {*DOCS.glob("*.md"), ROOT / "ARCHITECTURE.md", ROOT / "CONTRIBUTING.md"}
    assert sorted(str(p.relative_to(ROOT)) for p in pages if p.resolve() not in linked) == []


#: Paths the docs name that only a build makes (the wheel's copies of templates, migrations…).
BUILT = ("journal/_data/",)


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_the_docs_name_is_there(path: Path) -> None:
    """A module or file named in a code span (`journal/redact/`, `bench/history.py`,
    `journal/service/rollback*.py`) is where the docs say: code moves, the docs follow."""
    named = re.findall(
        r"`((?:journal|tests|bench|migrations|docs|templates|static)/[^`\s<>]*)`", path.read_text()
    )
    gone = [p for p in named if p not in BUILT and not any(ROOT.glob(p.rstrip("/")))]
    assert gone == []
