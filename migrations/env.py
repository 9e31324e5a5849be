"""Alembic environment: journal hands over an open connection (see journal.store.engine)."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:  # `alembic` run by hand: take the URL from alembic.ini / -x db=URL
    from sqlalchemy import create_engine

    url = context.get_x_argument(as_dictionary=True).get("db") or context.config.get_main_option(
        "sqlalchemy.url"
    )
    with create_engine(url).connect() as conn:
        context.configure(connection=conn)
        with context.begin_transaction():
            context.run_migrations()
        conn.commit()
else:
    context.configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()
