"""One grammar across the command line, read from each command's `--help`: a run is RUN, a
host H, a file FILE; `-o`/`--output` always names a file to write; every argument says what
it is; `journal --help` lists every command, by what it is for."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from journal.cli.parser import GROUPS, build_parser
from tests.helpers import journal, text


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command's parser (``journal run step``, ``journal pitfalls ack``…), by its words."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from commands(sub, (*path, name))


ALL = list(commands(build_parser()))


def test_every_command_is_listed_once_by_what_it_is_for() -> None:
    top = [words[0] for words, _ in ALL if len(words) == 1]
    grouped = [name for _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(top)
    shown = journal("--help")
    assert shown.returncode == 0
    out = text(shown.stdout)
    for title, names in GROUPS:
        assert f"  {title}:\n" in out
        for name in names:
            assert re.search(rf"^    {name} +\S", out, re.M), name


@pytest.mark.parametrize("words,parser", ALL, ids=[" ".join(w) for w, _ in ALL])
def test_one_grammar_in_every_commands_help(
    words: tuple[str, ...], parser: argparse.ArgumentParser
) -> None:
    said = f"journal {' '.join(words)}"
    shown = parser.format_help()
    # the same thing has the same name everywhere
    assert "RUN_ID" not in shown and "--host HOST" not in shown, shown
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        named = action.option_strings or [action.dest]
        if action.help == argparse.SUPPRESS:
            assert named == ["--output"], f"{said}: only an old name is hidden"
            continue
        assert action.help, f"{said}: {named} says nothing of itself"
        if "--host" in named:
            assert action.metavar == "H", f"{said} --host"
        if action.dest in ("run", "run_id", "runs"):
            assert action.metavar == "RUN", f"{said}: {action.dest}"
        if "-o" in named or "--output" in named:
            # -o / --output FILE writes a file; --full-output shows a run's whole output
            assert action.nargs is None and str(action.metavar).startswith("FILE"), said


def test_lint_offers_no_database() -> None:
    shown = text(journal("lint", "--help").stdout)
    assert "--db" not in shown and "--runbook" not in shown
    assert "reads no database" in shown


def test_show_and_log_say_full_output_and_still_take_the_old_name() -> None:
    for command in ("show", "log"):
        shown = text(journal(command, "--help").stdout)
        assert "--full-output" in shown and "--output" not in shown.replace("--full-output", "")
    parser = build_parser()
    assert parser.parse_args(["log", "--output"]).output is True
    assert parser.parse_args(["log", "--full-output"]).output is True
