"""Opening a database: URL or path, SQLite tuned for several writers, schema brought to head."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    NoSuchModuleError,
    OperationalError,
    ProgrammingError,
)

if TYPE_CHECKING:
    from alembic.config import Config

from journal.errors import BadInput
from journal.resources import folder

MIGRATIONS = folder("migrations")

#: How long an SQLite writer waits for another's lock before giving up (the environment's
#: JOURNAL_BUSY_TIMEOUT_S, in seconds, changes it).
BUSY_TIMEOUT_MS = 60_000


def busy_timeout_ms() -> int:
    try:
        return int(float(os.environ["JOURNAL_BUSY_TIMEOUT_S"]) * 1000)
    except (KeyError, ValueError):
        return BUSY_TIMEOUT_MS


#: The newest revision under migrations/ (a test checks it against Alembic's head). A database
#: already there is opened without importing Alembic, which costs a third of a command's start.
SCHEMA_HEAD = "0005"

#: PostgreSQL advisory-lock key held while the schema is brought to head, so two processes
#: opening a new database at once do not both create it (SQLite's BEGIN IMMEDIATE does this).
MIGRATION_LOCK = 0x6A6F75726E616C  # "journal"

#: How long connecting to a database server may take before `--db` is reported unreachable.
CONNECT_TIMEOUT_S = 10


def to_url(db: str) -> str:
    """A ``--db`` value as an SQLAlchemy URL: a URL stays as it is, a path becomes SQLite.

    A plain ``postgresql://`` URL gets psycopg 3, the driver journal depends on (SQLAlchemy's
    default for it would be psycopg2)."""
    if db.startswith("postgresql://"):
        return "postgresql+psycopg://" + db.removeprefix("postgresql://")
    if "://" in db:
        return db
    return f"sqlite:///{Path(db).expanduser().resolve()}"


def shown(db: str) -> str:
    """A ``--db`` value fit to print: a URL's password is masked."""
    if "://" not in db:
        return db
    try:
        return make_url(db).render_as_string(hide_password=True)
    except ArgumentError:
        return db


def alembic_config() -> Config:
    """Alembic's configuration, pointed at the project's ``migrations/`` folder."""
    from alembic.config import Config

    if not (MIGRATIONS / "env.py").exists():
        raise BadInput(f"the schema migrations are missing: no {MIGRATIONS}/env.py")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def _tune_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        # pysqlite's own implicit BEGIN is turned off so the "begin" hook below decides.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={busy_timeout_ms()}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # type: ignore[no-untyped-def]
        # A writer takes the write lock before it reads the last hash, so two processes can
        # never chain onto the same row; readers keep a plain deferred transaction.
        if conn.get_execution_options().get("write"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")


def _engine_options(url: URL) -> dict[str, Any]:
    if url.get_backend_name() == "postgresql" and "connect_timeout" not in url.query:
        return {"connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}
    return {}


def open_engine(db: str) -> Engine:
    """An engine for ``db`` with the schema at Alembic's head (upgrading an older database)."""
    url = to_url(db)
    try:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite" and parsed.database:
            folder = Path(parsed.database).parent
            if not folder.is_dir():
                raise BadInput(f"--db {db}: the folder {folder} does not exist")
        engine = create_engine(url, **_engine_options(parsed))
    except (ArgumentError, NoSuchModuleError) as exc:
        raise BadInput(
            f"--db {shown(db)!r} is neither a file path nor a usable SQLAlchemy URL: {exc}"
        ) from None
    except ImportError as exc:
        raise BadInput(
            f"--db {shown(db)!r}: the database driver is not installed ({exc})"
        ) from None
    if engine.dialect.name == "sqlite":
        _tune_sqlite(engine)
    try:
        upgrade_schema(engine)
    except DBAPIError as exc:
        # Unreachable server, unknown database, refused login, no right to create tables.
        engine.dispose()
        raise BadInput(f"--db {shown(db)}: cannot open the database: {exc.orig}") from None
    return engine


def head_revision() -> str:
    """The newest schema revision this version of journal knows."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """The schema revision the database is at (None for an empty database)."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def _at_head(engine: Engine) -> bool:
    """Whether the database is at SCHEMA_HEAD, asked without Alembic."""
    try:
        with engine.connect() as conn:
            found = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    except (OperationalError, ProgrammingError):
        return False  # no alembic_version table yet (SQLite says so one way, PostgreSQL another)
    return found == [SCHEMA_HEAD]


def upgrade_schema(engine: Engine) -> None:
    """Bring the schema to head; a database newer than this journal is refused."""
    if _at_head(engine):
        return
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    cfg = alembic_config()
    head = head_revision()
    if current_revision(engine) == head:
        return
    with engine.connect().execution_options(write=True) as conn:
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
            # Checked again under the write lock: another process may have just done it.
            current = MigrationContext.configure(conn).get_current_revision()
            if current == head:
                return
            known = {rev.revision for rev in ScriptDirectory.from_config(cfg).walk_revisions()}
            if current is not None and current not in known:
                raise BadInput(
                    f"the database is at schema revision {current}, which this version of "
                    f"journal does not know (its newest is {head}); upgrade journal"
                )
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
