"""What every command needs: the database, the runbook and which journal is meant."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from journal.errors import BadInput
from journal.runbook import Runbook, load

if TYPE_CHECKING:
    from journal.notify import Notifier
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
    _notifier: Notifier | None = field(default=None, repr=False)

    @property
    def store(self) -> EventStore:
        if self._store is None:
            # Imported here: SQLAlchemy and Alembic take most of a second to import, and a
            # command refused for bad input (or `--help`) should not wait for them.
            from journal.store import EventStore

            self._store = EventStore(self.db)
            if self._runbook is not None:
                self._store.know_secrets(self._runbook.redact)
        return self._store

    @property
    def runbook(self) -> Runbook:
        if self._runbook is None:
            self._runbook = load(self.runbook_path)
            if self._store is not None:  # what it lists is masked in every event (a note)
                self._store.know_secrets(self._runbook.redact)
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

    def read_journal(self) -> str:
        """The journal meant, for a command that only reads it (status, log, pitfalls, the
        exports, drift): bad input when it is neither the runbook's nor in the database, since a
        mistyped --journal would read as an empty journal. Commands that record (a step, a
        note, an import) open a journal by naming it and take :meth:`journal`."""
        name = self.journal()
        if self.db_exists() and self.store.has_journal(name):
            return name
        if self.has_runbook() and self.runbook.name == name:
            return name  # opened by its runbook; nothing recorded yet
        self.require_db(f"no journal {name!r} to read: ")
        from journal.store.engine import shown

        known = self.store.journals()
        where = f"the database {shown(self.db)}"
        if not known:
            raise BadInput(f"no journal named {name!r}: {where} holds no journal yet")
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise BadInput(
            f"no journal named {name!r} in {where}{hint}; the journals there: "
            f"{', '.join(known)} (pick one with --journal NAME)"
        )

    def db_exists(self) -> bool:
        """Whether ``--db`` names a database that is there (any URL but an SQLite file's is
        taken to be)."""
        path = self.db.removeprefix("sqlite:///") if self.db.startswith("sqlite:///") else self.db
        return "://" in path or Path(path).expanduser().exists()

    def require_db(self, why: str = "") -> None:
        """Bad input when ``--db`` names an SQLite file that is not there: a command that only
        reads (verify, rebuild, status without a runbook) must not create an empty database
        at a mistyped path and report on that."""
        if not self.db_exists():
            path = self.db.removeprefix("sqlite:///")
            raise BadInput(
                f"{why}there is no database at {path}; `journal init` creates one, "
                "or name one with --db (env JOURNAL_DB)"
            )

    def notifier(self, base_url: str | None = None) -> Notifier:
        """What tells the runbook's ``[notify.NAME]`` webhooks (nothing, without any); links
        go under ``base_url`` (``--base-url``), else the runbook's ``[journal] base_url``.
        :meth:`close` waits a bounded time for what it is still sending."""
        if self._notifier is None:
            from journal.notify import Notifier, Webhooks

            runbook = self.runbook
            self._notifier = (
                Webhooks(self.store, runbook, base_url) if runbook.notify else Notifier()
            )
        return self._notifier

    def close(self) -> None:
        if self._notifier is not None:
            self._notifier.close()  # after the command's work is recorded, at most a while
        if self._store is not None:
            self._store.close()


def default_db() -> str | None:
    """--db's default: JOURNAL_DB, else None (meaning ./journal.db, or DIR/journal.db for init)."""
    return os.environ.get("JOURNAL_DB")


def default_runbook() -> str:
    return os.environ.get("JOURNAL_RUNBOOK", "runbook.toml")
