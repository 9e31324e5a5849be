"""Builds the wheel with what journal needs besides its code, under ``journal/_data/``: the
schema migrations, the web templates and static files, and htmx with its SSE extension at the
versions package-lock.json pins (``npm ci`` installs them in node_modules/ first; `make
install` does). An editable install reads them from the checkout instead."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
FOLDERS = ("migrations", "templates", "static")
#: the htmx files served under /static/vendor/ (journal/resources.py names them too)
VENDOR = ("htmx.org/dist/htmx.min.js", "htmx.org/dist/htmx.js", "htmx-ext-sse/dist/sse.js")


class BuildWithData(build_py):
    """build_py, then the data folders and the htmx files copied into the package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        data = Path(self.build_lib) / "journal" / "_data"
        for name in FOLDERS:
            shutil.copytree(
                HERE / name,
                data / name,
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
        for path in VENDOR:
            source = HERE / "node_modules" / path
            if not source.is_file():
                raise SystemExit(
                    f"node_modules/{path} is missing: run `npm ci` (or `make install`) in "
                    f"{HERE} before building journal, so the wheel carries htmx"
                )
            target = data / "vendor" / path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


setup(cmdclass={"build_py": BuildWithData})
