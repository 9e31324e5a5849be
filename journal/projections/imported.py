"""Hosts a journal knows only from imported transcripts: no runbook entry, no plan, no ssh
target. `journal status` lists them by what was imported (not as ``pending`` against a plan
they never had), `journal record metric --host` accepts them, and the hosts page and `journal
drift` show what their transcripts printed of the stack."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from journal.display import plural, when
from journal.projections.drift.readings import TRANSCRIPT
from journal.projections.timeline import StepRunView, Timeline


@dataclass
class ImportedHost:
    """A host seen only in imported step runs: how many commands, the last, and what its
    transcripts printed of the stack (each key's latest reading, with its evidence)."""

    host: str
    commands: int
    last: StepRunView
    reading: dict[str, Any] | None = None


def imported_hosts(timeline: Timeline, known: list[str] | None = None) -> dict[str, ImportedHost]:
    """The hosts every step run of which was imported and that neither the journal's hosts
    nor ``known`` (the runbook's, where one is loaded) name."""
    named = set(timeline.hosts) | set(known or ())
    runs: dict[str, list[StepRunView]] = {}
    for run in timeline.step_runs():
        runs.setdefault(run.host, []).append(run)
    out = {}
    for host, those in runs.items():
        if host in named or not all(run.imported for run in those):
            continue
        out[host] = ImportedHost(host, len(those), those[-1], merged(those))
    return out


def merged(runs: list[StepRunView]) -> dict[str, Any] | None:
    """The transcript readings of ``runs`` as one: each key's latest value and evidence."""
    return merged_readings(p.result for run in runs for p in run.probes if p.probe == TRANSCRIPT)


def merged_readings(results: Iterable[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Transcript readings (in order) as one: each key's latest value and evidence."""
    from journal.projections.drift.readings import STACK

    out: dict[str, Any] = {"evidence": {}}
    for found in results:
        result = found or {}
        for key, _label in STACK:
            if key not in (result.get("evidence") or {}):
                continue
            node, into = result, out
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.get(part) or {}
                into = into.setdefault(part, {})
            into[leaf] = node.get(leaf)
            out["evidence"][key] = result["evidence"][key]
    return out if out["evidence"] else None


def stack_text(result: dict[str, Any]) -> str:
    """``torch 2.11.0+cu130, torch CUDA 13.0, NCCL 2.28.9, driver 580.159.04 …`` of a
    transcript reading (only what it printed)."""
    from journal.projections.drift.readings import STACK, read_field

    evidence = result.get("evidence") or {}
    return ", ".join(
        f"{label} {read_field(result, key).text}" for key, label in STACK if key in evidence
    )


def status_lines(host: ImportedHost) -> list[str]:
    """``host gpu-box (imported): 7 commands, last … at …`` and what its transcript printed."""
    last = host.last
    lines = [
        f"host {host.host} (imported): {plural(host.commands, 'command')}, last "
        f"{last.step} at {when(last.finished or last.started)}; no plan (not in the runbook)"
    ]
    if host.reading is not None:
        lines.append(f"  read from a transcript: {stack_text(host.reading)}")
    else:
        lines.append("  stack not read: its transcript printed no torch, CUDA, NCCL or driver")
    return lines


def as_dict(host: ImportedHost) -> dict[str, Any]:
    """An imported host for `journal status --format json`."""
    return {
        "host": host.host,
        "commands": host.commands,
        "last": {"step": host.last.step, "run": host.last.run_id, "at": host.last.started},
        "read_from_transcript": host.reading,
    }


def imported_names(store: Any, journal: str) -> list[str]:
    """The hosts transcripts were imported for in ``journal`` (read from its imports alone)."""
    records = store.read(journal, types=["TranscriptImported"])
    return list(dict.fromkeys(rec.event.host_name for rec in records))


def probe_refusal(host: str, runbook: str) -> str:
    """Why a host known only from an import cannot be probed (the exit-2 message)."""
    return (
        f"--host {host!r} is known only from an imported transcript: it has no address, so "
        f"it cannot be probed; add it to {runbook} as [hosts.{host}] with its ssh target "
        '(ssh = "user@address", or "local") and probe it then; what its transcript printed '
        "is on `journal drift` and the hosts page"
    )
