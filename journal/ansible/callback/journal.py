# journal's Ansible callback plugin: records each task on each host as a step run in the
# journal that JOURNAL_RUNBOOK / JOURNAL_DB name (see journal.ansible.recorder). Enable it with
#   ANSIBLE_CALLBACK_PLUGINS="$(journal ansible plugin-path)" ANSIBLE_CALLBACKS_ENABLED=journal
# (or callback_plugins / callbacks_enabled in ansible.cfg).
from __future__ import annotations

import os
import time
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: journal
    type: notification
    short_description: record every task on every host in a journal
    description:
      - Records each task on each host as a step run of the journal that JOURNAL_RUNBOOK (a
        runbook.toml) or JOURNAL_DB (an SQLite path or PostgreSQL URL) with JOURNAL_NAME name,
        with package snapshots around tasks that change packages; journal judges them.
    requirements:
      - journal installed in the python Ansible runs on
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "journal"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recorder = None
        self._play = None
        self._broken: str | None = None

    # the recorder is made at the playbook's start; any error of journal's is said once and
    # recording stops, the playbook goes on
    def _call(self, name: str, *args: Any, **kwargs: Any) -> None:
        if self._recorder is None or self._broken:
            return
        try:
            getattr(self._recorder, name)(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - never fail the playbook
            self._broken = f"{type(exc).__name__}: {exc}"
            self._display.warning(f"journal: recording stopped: {self._broken}")

    def v2_playbook_on_start(self, playbook: Any) -> None:
        from journal.ansible.recorder import PlaybookRecorder

        try:
            self._recorder = PlaybookRecorder(os.path.basename(playbook._file_name))
        except Exception as exc:  # noqa: BLE001 - a journal that cannot open fails nothing
            self._broken = f"{type(exc).__name__}: {exc}"
            self._display.warning(f"journal: not recording this playbook: {self._broken}")

    def _hosts(self) -> dict[str, dict[str, Any]]:
        play = self._play
        if play is None:
            return {}
        manager = play._variable_manager
        found = {}
        for host in manager._inventory.get_hosts(play.hosts):
            hv = host.get_vars()
            for group in host.get_groups():
                for key, value in group.get_vars().items():
                    hv.setdefault(key, value)
            found[host.name] = hv
        return found

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._play = play
        if self._recorder is not None and not self._broken:
            inventory = play._variable_manager._inventory
            groups = {
                name: [h.name for h in group.get_hosts()]
                for name, group in inventory.groups.items()
                if name not in ("all", "ungrouped")
            }
            self._call("play_started", play.get_name().strip(), self._hosts(), groups)

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._task_started(task)

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self._task_started(task)

    def _task_started(self, task: Any) -> None:
        if self._recorder is None or self._broken:
            return
        info = {
            "name": task.get_name().strip(),
            "module": task.action,
            "args": dict(task.args or {}),
            "tags": list(task.tags or []),
            "vars": dict(task.vars or {}),
            "path": task.get_path(),
        }
        hosts = self._hosts()
        self._call("task_started", info, hosts, self._rendered(task, hosts))

    def _rendered(self, task: Any, hosts: dict[str, dict[str, Any]]) -> dict[str, dict]:
        """The task's arguments as each host will see them (``virtualenv: "{{ venv }}"``),
        rendered with the host's and the task's variables where Ansible can; a host whose
        arguments cannot be rendered here keeps them as written."""
        from journal.ansible.tasks import changes_packages

        args = dict(task.args or {})
        if not changes_packages(task.action, args, list(task.tags or [])):
            return {}
        try:
            from ansible.template import Templar
        except ImportError:
            return {}
        loader = getattr(self._play, "_loader", None)
        out = {}
        for name, hv in hosts.items():
            try:
                variables = {**hv, **dict(task.vars or {}), "inventory_hostname": name}
                out[name] = Templar(loader=loader, variables=variables).template(args)
            except Exception:  # noqa: BLE001, S112 - a variable only the worker knows
                continue
        return out

    def v2_runner_on_start(self, host: Any, task: Any) -> None:
        self._call("runner_started", host.get_name())

    def v2_runner_on_ok(self, result: Any) -> None:
        self._call("result", result._host.get_name(), "ok", result._result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._call("result", result._host.get_name(), "failed", result._result, ignore_errors)

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._call("result", result._host.get_name(), "skipped", result._result)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._call("result", result._host.get_name(), "unreachable", result._result)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        if self._recorder is None:
            return
        started = time.monotonic()
        try:
            runs, lost, errors = self._recorder.close()
        except Exception as exc:  # noqa: BLE001
            self._display.warning(f"journal: could not finish the record: {exc}")
            return
        took = time.monotonic() - started
        where = self._recorder.db
        if lost or errors or self._broken:
            why = "; ".join(errors + ([self._broken] if self._broken else []))
            self._display.warning(
                f"journal: {lost} events could not be written to {where} ({why}); "
                f"{runs} task runs were recorded"
            )
        else:
            self._display.display(
                f"journal: recorded {runs} task runs in {self._recorder.journal} ({where}, "
                f"finished in {took:.1f}s): `journal status` tells it"
            )
