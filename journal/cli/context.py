"""What every command needs: the database, the runbook and which journal is meant."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from journal.errors import BadInput
from journal.runbook import Runbook, load

if TYPE_CHECKING:
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
            # Imported here: SQLAlchemy and Alembic take most of a second to import, and a
            # command refused for bad input (or `--help`) should not wait for them.
            from journal.store import EventStore

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
        self.require_db(f"there is no runbook at {self.runbook_path} and ")
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

    def require_db(self, why: str = "") -> None:
        """Bad input when ``--db`` names an SQLite file that is not there: a command that only
        reads (verify, rebuild, status without a runbook) must not create an empty database
        at a mistyped path and report on that."""
        path = self.db.removeprefix("sqlite:///") if self.db.startswith("sqlite:///") else self.db
        if "://" not in path and not Path(path).expanduser().exists():
            raise BadInput(
                f"{why}there is no database at {path}; `journal init` creates one, "
                "or name one with --db (env JOURNAL_DB)"
            )

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def default_db() -> str | None:
    """--db's default: JOURNAL_DB, else None (meaning ./journal.db, or DIR/journal.db for init)."""
    return os.environ.get("JOURNAL_DB")


def default_runbook() -> str:
    return os.environ.get("JOURNAL_RUNBOOK", "runbook.toml")
