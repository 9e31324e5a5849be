"""journal's start: `journal --help` and a command's `--help` list every command and flag while
loading none of the command families (nor the store, Flask, Fabric behind them), and every
command the parser knows runs a function of its family, imported when it runs."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from journal.cli import build_parser, handler
from tests.helpers import journal, text

#: What `journal --help` must not load: a command family, the store, the services, or the
#: libraries behind them (each costs tens to hundreds of milliseconds to import).
HEAVY = ("sqlalchemy", "alembic", "flask", "werkzeug", "jinja2", "fabric", "paramiko", "invoke")


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, dict[str, str]]]:
    """(command path, its parser, each subcommand's help) for the parser and every command."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {c.dest: c.help or "" for a in subs for c in a._choices_actions}
    yield path, parser, helps
    for action in subs:
        for name, sub in action.choices.items():
            yield from commands(sub, (*path, name))


def test_help_lists_every_command_and_subcommand_with_its_help() -> None:
    groups = [(path, helps) for path, _, helps in commands(build_parser()) if helps]
    assert {path for path, _ in groups} >= {(), ("run",), ("export",), ("db",), ("pitfalls",)}
    for path, helps in groups:
        done = journal(*path, "--help", env={**os.environ, "COLUMNS": "200"}, process=True)
        assert done.returncode == 0, text(done.stderr)
        out = " ".join(text(done.stdout).split())  # the help as one line, whatever wrapped
        for name, help_text in helps.items():
            assert f" {name} " in out, f"`journal {' '.join(path)} --help` lacks {name}"
            assert " ".join(help_text.split()) in out, f"{name}'s help is not in it"
    top = text(journal("--help", process=True).stdout)
    assert "shell" in top and "rollback" in top and "--db URL|PATH" in top


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["run", "step", "--help"],
        ["export", "postmortem", "--help"],
        ["serve", "--help"],
        ["log", "--limit", "many"],  # refused by the parser: exit 2 before anything loads
    ],
)
def test_help_and_a_refused_command_load_no_command_family(argv: list[str]) -> None:
    probe = (
        "import json, sys\n"
        "from journal.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as exit_:\n"
        "    code = exit_.code\n"
        "print(json.dumps([code, sorted(sys.modules)]), file=sys.__stderr__)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=60)
    code, modules = json.loads(text(done.stderr).splitlines()[-1])
    assert code == (2 if argv[0] == "log" else 0)
    loaded = [m for m in modules if m.split(".")[0] in HEAVY]
    assert loaded == []
    journal_modules = {m for m in modules if m.startswith("journal.")}
    assert journal_modules <= {
        "journal.cli",
        "journal.cli.parser",
        "journal.cli.startup",
        "journal.errors",
    }


def test_every_command_runs_a_function_of_its_family() -> None:
    leaves = [
        (path, parser._defaults["func"])
        for path, parser, _ in commands(build_parser())
        if "func" in parser._defaults
    ]
    assert len(leaves) >= 25 and (("run", "step"), "running.run_step") in leaves
    for path, name in leaves:
        run = handler(name)
        assert callable(run), f"journal {' '.join(path)}: {name} is no function"
        assert run.__module__ == f"journal.cli.{name.split('.')[0]}"
