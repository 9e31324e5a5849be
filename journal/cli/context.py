"""What every command needs: the database, the runbook and which journal is meant, and the
options several command families share (``--parallel``/``--rolling``, ``--base-url``)."""

from __future__ import annotations

import argparse
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from journal.cli.parser import encodable
from journal.errors import BadInput, shown
from journal.runbook import NAME, NAME_LENGTH, NAME_RULE, Runbook, load

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
            return self._named(self.journal_name)
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
            f"({listed(names)}); pick one with --journal NAME"
        )

    def _named(self, name: str) -> str:
        """``--journal NAME`` when it is a usable name (as a runbook's ``[journal] name`` must
        be: both backends hold it as it is), or one the database already holds (recorded
        before names were checked); else bad input, before anything is opened or written."""
        if NAME.match(name):
            return name
        if (
            len(name) <= NAME_LENGTH
            and encodable(name)
            and self.db_exists()
            and self.store.has_journal(name)
        ):
            return name
        raise BadInput(
            f"--journal {shown(name)} is not a usable journal name ({NAME_RULE}); nothing "
            "was read or recorded"
        )

    def open_journal(self, journal: str) -> None:
        """The runbook's journal opened (its hosts and plan recorded) before a record of a
        note or an import: `journal init` leaves that to the first record."""
        if self.has_runbook() and self.runbook.name == journal:
            from journal.service.steps import ensure_opened

            ensure_opened(self.store, self.runbook)

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
        self.require_db(f"no journal {shown(name)} to read: ")
        from journal.store.engine import shown as url_shown

        known = self.store.journals()
        where = f"the database {url_shown(self.db)}"
        if not known:
            raise BadInput(f"no journal named {shown(name)}: {where} holds no journal yet")
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise BadInput(
            f"no journal named {shown(name)} in {where}{hint}; the journals there: "
            f"{listed(known)} (pick one with --journal NAME)"
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


def listed(names: list[str], most: int = 10) -> str:
    """Names for a message: each as it is (a long one shortened), the first ``most`` of them
    and how many more."""
    shortened = [name if len(name) <= 60 else shown(name) for name in names[:most]]
    more = f" and {len(names) - most:,} more" if len(names) > most else ""
    return ", ".join(shortened) + more


def schedule_of(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The fleet schedule of ``--parallel N`` / ``--rolling N`` (bad values: bad input)."""
    from journal.service.fleet import Schedule

    parallel, rolling = args.parallel, args.rolling
    for flag, value in (("--parallel", parallel), ("--rolling", rolling)):
        if value is not None and value < 1:
            raise BadInput(
                f"{flag} {value}: give the number of hosts at work at once, 1 or more "
                f"({flag} 1 runs one host at a time)"
            )
    if parallel is not None and rolling is not None:
        raise BadInput(
            f"--parallel {parallel} and --rolling {rolling} cannot be combined: "
            "--rolling N already runs N hosts at a time (and stops at a failure), "
            "--parallel N runs every host, N at a time; pick one"
        )
    return Schedule(parallel, rolling)


def base_url_of(args: argparse.Namespace) -> str | None:
    """``--base-url``, checked: an http(s) URL with a host, without its trailing slash (None
    when not given: the runbook's ``[journal] base_url``, if any)."""
    from urllib.parse import urlsplit

    url = getattr(args, "base_url", None)
    if not url:
        return None
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise BadInput(
            f"--base-url {url!r} is not an http(s) URL of the web UI (such as "
            "http://gpu-box:8000, where `journal serve` answers)"
        )
    return url.strip().rstrip("/")
