"""How the suite is spread over xdist workers (``make test``: ``-n 3 --dist loadgroup``).

A test that uses a module-scoped fixture joins its module's ``xdist_group``: one worker makes
the module's fixtures (a real venv, a recorded journal, a browser) once, where tests spread
over three workers made them three times. Every other test goes to whichever worker is free.
"""

from __future__ import annotations

import pytest


def group_by_module_fixtures(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test that uses a module-scoped fixture with its module's xdist group (run
    before xdist reads the groups; nothing without xdist, whose mark it is)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.module is not None and _uses_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__.rsplit(".", 1)[-1]))


def _uses_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values())
