"""journal for fleets that run on Ansible: a callback plugin that records each task on each
host as a step run (:mod:`journal.ansible.recorder`), and what it reads of tasks
(:mod:`journal.ansible.tasks`). `journal ansible plugin-path` prints the folder to put in
``ANSIBLE_CALLBACK_PLUGINS`` (or ``callback_plugins`` in ansible.cfg)."""

from __future__ import annotations

from pathlib import Path


def plugin_dir() -> Path:
    """The folder holding journal's callback plugin (``journal.py``)."""
    return Path(__file__).resolve().parent / "callback"
