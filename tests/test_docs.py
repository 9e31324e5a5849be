"""The README documents every command and every event type (as datasette's test_docs does)."""

from __future__ import annotations

import argparse
from pathlib import Path

from journal.cli import build_parser
from journal.events import EVENT_TYPES

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def commands(parser: argparse.ArgumentParser, prefix: str = "journal") -> list[str]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = commands(sub, f"{prefix} {name}")
                found.extend(nested or [f"{prefix} {name}"])
    return found


def test_every_command_is_in_the_readme() -> None:
    names = commands(build_parser())
    assert "journal run step" in names and "journal verify" in names
    missing = [name for name in names if f"`{name}" not in README and f"{name} " not in README]
    assert missing == []


def test_every_event_type_is_documented() -> None:
    for name, cls in EVENT_TYPES.items():
        assert f"`{name}`" in README, name
        assert cls.__doc__ and len(cls.__doc__.split()) > 5, name
