"""`journal drift`: every host's GPU stack side by side within its group, the odd values
marked, and a line per divergence saying since which step run the host differs.

Exit status 0 when every host agrees, 1 when a host drifts (as `journal verify` does for
tampering), 2 for bad input: an unknown group, or a journal with nothing read to compare.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from journal.cli.context import Context, base_url_of
from journal.display import when
from journal.errors import BadInput
from journal.projections.drift import (
    NOT_INSTALLED,
    Drift,
    GroupDrift,
    Row,
    Since,
    StepRunRef,
    compare,
    runbook_groups,
)
from journal.terminal import visible

#: Widest a value is shown in the table (the lines below it spell it out in full).
CELL_WIDTH = 30
UNREAD = "unread"
ODD = " *"


def drift(ctx: Context, args: argparse.Namespace) -> int:
    base_url = base_url_of(args)
    journal = ctx.read_journal()
    ctx.require_db()
    from journal.projections.drift.kept import current_readings

    readings = current_readings(ctx.store, journal)  # folded on from where it was stored
    if ctx.has_runbook() and ctx.runbook.name == journal:
        groups = dict(getattr(ctx.runbook, "groups", None) or {})
    else:
        groups = runbook_groups(readings.runbook, journal)
    report = compare(readings, groups or readings.groups)
    if args.group is not None:
        chosen = [g for g in report.groups if g.name == args.group]
        if not chosen:
            from journal.runbook import suggest

            names = [g.name for g in report.groups]
            raise BadInput(
                f"no group named {args.group!r} in {journal}{suggest(args.group, names)}"
            )
        report = Drift(report.journal, chosen)
    if not any(g.read for g in report.groups):
        where = f"group {args.group!r} of " if args.group else ""
        raise BadInput(
            f"nothing to compare: no host of {where}the journal {journal!r} in {ctx.db} has been "
            "probed, snapshotted or read from an imported transcript yet; run `journal run probe "
            "torch-env` and `journal run probe packages` (steps snapshot the packages too)"
        )
    if args.format == "json":
        print(json.dumps(as_json(report), indent=2, ensure_ascii=False))
    else:
        print(visible(text(report)))  # the values were read on the hosts
    if report.drifts and ctx.has_runbook() and ctx.runbook.name == journal:
        drifting = [g for g in report.groups if g.divergences()]
        lines = [sentence(row, host) for g in drifting for row, host in g.divergences()]
        ctx.notifier(base_url).drifted([g.name for g in drifting], lines)
    return 1 if report.drifts else 0


# -- words --------------------------------------------------------------------------------------


def since_text(since: Since) -> str:
    """``since step install-torch (run …)``, ``since first seen``, or what else is known."""
    if since.first_seen:
        return "since first seen"
    if not since.runs:
        seen = since.seen
        where = {"probe": "torch-env probe", "transcript": "imported transcript"}.get(
            seen.kind, f"{seen.phase} package snapshot"
        )
        return f"changed outside the recorded steps (first seen in the {where}, event {seen.seq})"
    steps = " or ".join(f"{run.step} (run {run.run_id})" for run in since.runs)
    gap = ", with no reading between them" if len(since.runs) > 1 else ""
    return f"since step {steps}{gap}"


def sentence(row: Row, host: str) -> str:
    """``h3: torch 2.12… where 3 of 4 hosts have 2.10…, since step install-torch (run …)``."""
    cell = row.cells[host]
    what = f"package {row.label}" if row.kind == "packages" else row.label
    if row.majority == NOT_INSTALLED:
        where = f"{row.counts[row.majority]} of {row.known} hosts do not have it"
    elif row.majority is not None:
        where = f"{row.counts[row.majority]} of {row.known} hosts have {row.majority}"
    else:
        spread = ", ".join(f"{value} on {n}" for value, n in row.counts.items())
        where = f"no value is held by most hosts ({spread})"
    since = since_text(cell.since) if cell.since else ""
    if cell.since and cell.since.first_seen and row.majority_steps:
        since += f" (the others took {row.majority} with step {', '.join(row.majority_steps)})"
    return f"{host}: {what} {cell.text} where {where}, {since}"


def _clip(value: str) -> str:
    return value if len(value) <= CELL_WIDTH else value[: CELL_WIDTH - 1] + "…"


def group_text(group: GroupDrift) -> list[str]:
    """One group as a table (rows no host has a value for are left out) and its divergences."""
    header = ["", "majority", *group.hosts]
    probed = []
    for host in group.hosts:
        source, printed = group.probed.get(host), group.transcribed.get(host)
        probed.append(when(source.ts) if source else "transcript" if printed else "never")
    table = [header, ["probed", "", *probed]]
    section = None
    for row in group.rows:
        if row.known == 0:
            continue
        if row.kind != section:
            section = row.kind
            table.append(["stack (torch-env)" if section == "stack" else "key packages"])
        majority = row.majority if row.majority is not None else "(no majority)"
        cells = []
        for host in group.hosts:
            cell = row.cells[host]
            shown = UNREAD if cell.text is None else _clip(cell.text)
            cells.append(shown + (ODD if cell.odd else ""))
        table.append([f"  {row.label}", _clip(majority), *cells])
    widths = [max(len(r[i]) for r in table if len(r) > i) for i in range(len(header))]
    lines = []
    for cols in table:
        if len(cols) == 1:
            lines.append(cols[0])
        else:
            lines.append("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip())
    divergences = group.divergences()
    if divergences:
        lines.append(f"{ODD.strip()} differs from the group's majority (or the row has none)")
        lines += [sentence(row, host) for row, host in divergences]
    return lines


def text(report: Drift) -> str:
    """The whole report for the terminal, ending with a one-line verdict."""
    out = []
    for group in report.groups:
        out.append(f"group {group.name} of {report.journal} ({len(group.hosts)} hosts)")
        out += group_text(group)
        out.append("")
    drifting = [f"{h} (in {g.name})" for g in report.groups for h in g.drifting]
    if drifting:
        verb = "differs" if len(drifting) == 1 else "differ"
        out.append(f"drift: {', '.join(drifting)} {verb} from the group's majority")
    elif len(report.groups) == 1 or not any(g.comparable for g in report.groups):
        verdicts = [g.verdict for g in report.groups]
        out.append(
            verdicts[0]
            if len(verdicts) == 1
            else "; ".join(f"group {g.name}: {g.verdict}" for g in report.groups)
        )
    else:
        out.append("no drift: every host that was read agrees with its group")
    transcribed = [
        f"{h} (event {s.seq})" for g in report.groups for h, s in g.transcribed.items() if s
    ]
    if transcribed:
        out.append(
            f"read from an imported transcript (not probed): {', '.join(transcribed)}; "
            "`--format json` gives each value's line"
        )
    return "\n".join(out)


# -- JSON ---------------------------------------------------------------------------------------


def _run(run: StepRunRef) -> dict[str, Any]:
    return {"run": run.run_id, "step": run.step, "ts": run.ts, "status": run.status}


def _since(since: Since | None) -> dict[str, Any] | None:
    if since is None:
        return None
    return {
        "first_seen": since.first_seen,
        "runs": [_run(run) for run in since.runs],
        "seen": asdict(since.seen),
        "text": since_text(since),
    }


def as_json(report: Drift) -> dict[str, Any]:
    """The ``--format json`` shape: the journal, ``drift`` (true when any host differs), and per
    group its hosts, ``drifting`` hosts, ``rows`` (each host's value, where it was read, whether
    it differs) and ``divergences`` (host, key, value, majority, ``since``)."""
    groups = []
    for group in report.groups:
        rows = []
        for row in group.rows:
            values = {
                host: {
                    "value": cell.text,
                    "note": cell.note,
                    "read": asdict(cell.source) if cell.source else None,
                    "differs": cell.odd,
                }
                for host, cell in row.cells.items()
            }
            rows.append(
                {
                    "key": row.key,
                    "label": row.label,
                    "kind": row.kind,
                    "majority": row.majority,
                    "counts": row.counts,
                    "differs": row.differs,
                    "values": values,
                }
            )
        divergences = [
            {
                "host": host,
                "key": row.key,
                "label": row.label,
                "value": row.cells[host].text,
                "majority": row.majority,
                "hosts_with_majority": row.counts[row.majority] if row.majority else 0,
                "hosts_read": row.known,
                "since": _since(row.cells[host].since),
                "text": sentence(row, host),
            }
            for row, host in group.divergences()
        ]
        groups.append(
            {
                "name": group.name,
                "hosts": group.hosts,
                "drifting": group.drifting,
                "read": group.read,
                "comparable": group.comparable,
                "verdict": group.verdict if not group.drifting else None,
                "rows": rows,
                "divergences": divergences,
            }
        )
    return {"journal": report.journal, "drift": report.drifts, "groups": groups}
