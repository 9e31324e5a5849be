"""Where the files journal needs besides its code come from: the schema migrations, the web
templates and static files, and htmx with its SSE extension.

A wheel carries them inside the package, under ``journal/_data/`` (``setup.py`` copies them
there when it builds: htmx from ``node_modules/``, as ``npm ci`` installed it from the lock
file). An editable install (``make install``) reads them from the checkout, where they live at
the top of the repository.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: The checkout's root, for an editable install.
CHECKOUT = Path(__file__).resolve().parents[1]

#: name under /static/vendor/ -> path under node_modules/ (and under _data/vendor/ in a wheel)
VENDOR = {
    "htmx.min.js": "htmx.org/dist/htmx.min.js",
    "htmx.js": "htmx.org/dist/htmx.js",
    "sse.js": "htmx-ext-sse/dist/sse.js",
}


def packaged() -> Path | None:
    """The data folder inside the installed package, when this is a built install."""
    found = Path(str(resources.files("journal") / "_data"))
    return found if found.is_dir() else None


def folder(name: str) -> Path:
    """``migrations``, ``templates`` or ``static``: inside the package, else in the checkout."""
    data = packaged()
    return data / name if data is not None else CHECKOUT / name


def vendor_root() -> Path:
    """Where the htmx files are: ``_data/vendor`` in a wheel, else ``node_modules``."""
    data = packaged()
    return data / "vendor" if data is not None else CHECKOUT / "node_modules"
