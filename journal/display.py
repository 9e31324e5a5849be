"""How values are written for people, the same in the terminal, the web UI and the exports:
times, durations, counts, figures, a command's first line, what a rollback put back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def when(ts: str | None) -> str:
    """``2026-11-30 09:41:02Z`` from a stored timestamp."""
    if not ts:
        return "-"
    return ts[:10] + " " + ts[11:19] + "Z"


def seconds(value: float) -> str:
    """A duration as people read it: ``0.03s``, ``12.4s``, ``3m05s``, ``1h02m``."""
    if value < 10:
        return f"{value:.2f}s"
    if value < 60:
        return f"{value:.1f}s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def plural(n: int, word: str) -> str:
    """``1 line``, ``3 lines``."""
    return f"{n} {word}" + ("" if n == 1 else "s")


def figure(value: float, unit: str | None) -> str:
    """``96.10 tok/s``, ``4,251 GB/s``: two decimals below 1,000, none above."""
    number = f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{number} {unit}" if unit else number


def first_line(command: str) -> str:
    """A command's first line, with ``…`` when more follow."""
    head, _, rest = command.strip().partition("\n")
    return head + (" …" if rest else "")


def rollback_text(rollback: dict[str, Any], short: Callable[[str], str] = str) -> str:
    """What a rollback run put back: ``rollback to before:install-torch: the 5 packages
    before run 1a23…`` (``StepStarted.rollback``), its run's id as ``short`` shows it."""
    count = len(rollback.get("packages") or {})
    side = "before" if rollback.get("phase") == "before" else "after"
    return (
        f"rollback to {rollback.get('to')}: the {plural(count, 'package')} {side} run "
        f"{short(rollback.get('run') or '')}"
    )


def ansible_text(ansible: dict[str, Any]) -> str:
    """An Ansible task run's context in one line: ``ansible: play.yml, play 'Upgrade torch'
    (batch 2), task 'Install torch' (tasks.yml:12), ansible.builtin.pip; changed``."""
    batch = f" (batch {ansible['batch']})" if (ansible.get("batch") or 1) > 1 else ""
    where = f" ({ansible['path']})" if ansible.get("path") else ""
    said = [k for k in ("changed", "unreachable", "ignore_errors") if ansible.get(k)]
    told = f"; {', '.join(said)}" if said else "; not changed" if not ansible.get("skipped") else ""
    return (
        f"ansible: {ansible.get('playbook')}, play {ansible.get('play')!r}{batch}, task "
        f"{ansible.get('task')!r}{where}, {ansible.get('module')}{told}"
    )
