"""What every command needs: the database, the runbook and which journal is meant."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from journal.errors import BadInput
from journal.runbook import Runbook, load
from journal.store import EventStore


@dataclass
class Context:
    """The global options, opened lazily: a command that needs no database opens none."""

    db: str
    runbook_path: str
    journal_name: str | None = None
    db_given: bool = True
    _store: EventStore | None = field(default=None, repr=False)
    _runbook: Runbook | None = field(default=None, repr=False)

    @property
    def store(self) -> EventStore:
        if self._store is None:
            self._store = EventStore(self.db)
        return self._store

    @property
    def runbook(self) -> Runbook:
        if self._runbook is None:
            self._runbook = load(self.runbook_path)
        return self._runbook

    def has_runbook(self) -> bool:
        return Path(self.runbook_path).is_file()

    def journal(self) -> str:
        """The journal meant: --journal, else the runbook's, else the only one in the database."""
        if self.journal_name:
            return self.journal_name
        if self.has_runbook():
            return self.runbook.name
        names = self.store.journals()
        if len(names) == 1:
            return names[0]
        if not names:
            raise BadInput(
                f"the database {self.db} holds no journal yet and there is no runbook at "
                f"{self.runbook_path}; start with `journal init`"
            )
        raise BadInput(
            f"no runbook at {self.runbook_path} and the database holds several journals "
            f"({', '.join(names)}); pick one with --journal NAME"
        )

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def default_db() -> str | None:
    """--db's default: JOURNAL_DB, else None (meaning ./journal.db, or DIR/journal.db for init)."""
    return os.environ.get("JOURNAL_DB")


def default_runbook() -> str:
    return os.environ.get("JOURNAL_RUNBOOK", "runbook.toml")
