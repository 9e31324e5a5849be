"""The postmortem of a journal, in the shape of the Google SRE postmortem: its content, built once.

:func:`build` turns a judged journal (findings and timeline) into a plain dict; the JSON export
is that dict as JSON, and the Markdown (:mod:`journal.export.markdown`) and HTML
(:mod:`journal.export.html`) exports render it, so the three always say the same. Everything
in it comes from the record: nothing is guessed, and a section the record cannot fill is empty.

Keys (stable, snake_case; times are the store's UTC ISO 8601 timestamps, durations seconds):

- ``format`` ("journal-postmortem"), ``version`` (1): what this document is.
- ``title``, ``journal``, ``date`` (the day the record starts, ``YYYY-MM-DD``) and ``period``
  (``start``, ``end``, ``seconds``).
- ``hosts``: ``name``, ``target`` (an SSH target, ``local``, or ``imported``), ``step_runs``,
  ``failed``.
- ``status``: ``running`` while a step runs; ``open`` while an error finding is open (neither
  resolved by a later fact nor acknowledged) or the latest run of a step on a host did not
  succeed (an imported command, whose exit status is unknown, counts as done); else
  ``mitigated`` while a warning is open; else ``resolved`` (open ``info`` findings stay
  action items but do not keep it open). ``status_reasons`` says why, one sentence each.
- ``story``: the upgrade at a glance (:mod:`journal.service.story`, as
  ``journal status`` tells it): ``hosts`` (each ``host``, its ``stack``: torch, CUDA, NCCL and
  driver from the first and the latest torch-env reading, and ``packages``: the key packages
  that moved between the first and the latest package snapshot, each ``what``, ``before``,
  ``after``, ``changed``; ``other_packages``: how many others moved; ``unread``: the
  snapshots and torch-env readings that failed where the story compares, each ``probe``,
  ``phase``, ``run``, ``step``, ``error``, ``text``), ``headline`` (the
  headline rate series: ``first``, ``worst``, ``last``, ``percent``, ``verdict``…, or None),
  ``findings`` (``open`` by severity, ``acknowledged``, ``resolved``) and ``lines`` (the same
  in words).
  The summary opens with it, the stack as a table per host (before, after).
- ``failures``: each step run that did not succeed (a ``skipped`` one did not fail), in
  order: ``run``, ``step``, ``host``, ``time``, ``status``, ``exit_code``, ``command``,
  ``url`` (its page, with a base URL), ``stderr`` (the last lines it printed on stderr, at
  most 20, ANSI codes out) and ``stderr_before`` (how many stderr lines came before those).
- ``summary``: ``sentences`` generated from the record (runs, hosts, failures, pitfalls, the
  headline throughput change, unless the story tells it) and ``notes`` tagged ``summary``.
- ``impact``: ``throughput`` (series of rates: tok/s, GB/s, …) and ``other`` (latencies,
  counts), each series with ``metric``, ``title``, ``host``, ``labels``, ``unit``, ``points``,
  ``changes`` (consecutive sets of trusted figures: a set is the repeated samples of one
  benchmark run, or one figure; one change per set, never per sample), ``overall`` (the first
  set against the last) and ``latest`` (the last set: ``median``, ``samples``, ``spread``,
  ``time``, ``run``; None without a trusted figure); a change has ``before``, ``after`` (the
  sets' medians), ``before_samples``, ``after_samples``, ``before_spread``, ``after_spread``
  (min and max), ``delta``, ``percent`` (one decimal), ``better`` (the direction alone),
  ``verdict`` (``better``, ``worse``, ``noise``, ``same``, ``count``: the one verdict,
  :func:`journal.projections.verdict.judge`, that every format colours and says and the
  ``throughput-regression`` detector fires on; within the noise is neither gain nor loss),
  ``why`` (the verdict's reason in words), ``between``.
  ``headline`` is the overall change of the first throughput series, or None.
- ``charts``: each chart of the figures (:mod:`journal.export.chart`): ``title``, ``metric``,
  ``unit``, ``throughput`` (a chart of rates: the impact section shows those, the HTML keeps
  the others folded, Markdown links only those) and ``svg`` (inline SVG).
- ``timeline``: every step run (``kind`` step or benchmark), standalone probe and figure, note
  and accepted host key in order, with ``time``, ``elapsed`` (since the start) and, for runs,
  ``duration``, ``status``, probes, expectations, figures, finding keys and ``unread`` (its
  snapshots and probes that could not be read).
- ``changes``: per host, the step runs that changed (or verifiably did not change) packages,
  from the snapshots or else from the installer's output (``source``), and what each probe
  read differently from its previous result on that host (noise left out: a field that held
  nothing before and after, a path or a time); a run whose snapshot could not be read is
  there with ``unread``: what it changed is not known.
- ``pitfalls``: every finding with its ``evidence`` (the first lines), ``state`` (``open``,
  ``acknowledged``, ``resolved``), ``resolved_by`` (the later ``run``, ``step``, ``host``,
  ``kind``: run, probe or figure, and ``why``), ``acknowledged`` (``note``, ``by``, ``at``),
  ``regression_of`` (the earlier finding it repeats) and ``resolution`` (the same, worded:
  ``acknowledged`` and the ``later`` facts).
- ``root_causes``, ``trigger``, ``lessons``: notes tagged ``root-cause``, ``trigger``,
  ``lesson``. ``action_items``: open findings only, each pitfall once per advice (``keys``,
  ``hosts``, ``runs`` it covers; ``links``: each run with its ``url`` on the web, given
  `--base-url`), ``advice`` its first sentence (``advice_full`` whole), then notes tagged
  ``action``.
- ``supporting``: ``commands`` (every command run, in order), ``versions`` (per host: the
  latest torch-env probe and the versions of the packages the journal changed) and
  ``record`` (journal's version, event count, last event).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from journal.export.changes import failed_runs, host_changes, versions
from journal.export.entries import elapsed, entry, note_dict
from journal.export.findings import action_items, pitfall_dict, run_url
from journal.export.impact import headline_text, impact
from journal.pitfalls.base import SEVERITIES, STATES, Finding
from journal.projections.metrics import change_steps
from journal.projections.period import Part
from journal.projections.progress import stands
from journal.projections.timeline import (
    NoteView,
    StepRunView,
    Timeline,
)
from journal.runs import DONE


def _times(timeline: Timeline) -> list[str]:
    times = []
    for item in timeline.items:
        ts = item.started if isinstance(item, StepRunView) else item.ts
        times.append(ts)
        if isinstance(item, StepRunView) and item.finished:
            times.append(item.finished)
    return sorted(times)


def is_empty(timeline: Timeline) -> bool:
    """Whether the journal holds nothing a postmortem could tell (no run, note or figure)."""
    return not timeline.items


def build(
    findings: list[Finding],
    timeline: Timeline,
    *,
    outputs: Mapping[str, str] | None = None,
    charts: list[Any] | None = None,
    journal_version: str | None = None,
    tails: Mapping[str, dict[str, Any]] | None = None,
    base_url: str | None = None,
    part: Part | None = None,
) -> dict[str, Any]:
    """The postmortem of a judged journal (see the module docstring for its keys).

    ``outputs`` holds the recorded output of step runs without package snapshots (see
    :func:`journal.export.changes.outputs_needed`), read for the changes their installer
    printed; ``charts`` the charts of the figures (default: :func:`charts_of` the timeline);
    ``tails`` the stderr tail of each failed run (:func:`journal.export.changes.failures`);
    ``base_url`` where the web serves the journal, for links to run pages; ``part`` the
    part of the journal told (``timeline`` and ``findings`` are cut to it: see
    :mod:`journal.projections.period`), named in the title and under ``part``.
    """
    from journal.service.story import lines, story

    if journal_version is None:
        from journal import __version__ as journal_version
    times = _times(timeline)
    start, end = (times[0], times[-1]) if times else (None, None)
    runs = timeline.step_runs()
    steps = change_steps(timeline)
    notes = [item for item in timeline.items if isinstance(item, NoteView)]
    by_run: dict[str, list[Finding]] = {}
    for found in findings:
        if found.run:
            by_run.setdefault(found.run, []).append(found)
    effect = impact(timeline, steps)
    changed = host_changes(timeline, outputs or {})
    status, reasons = status_of(findings, timeline)
    told = story(timeline, findings)
    return {
        "format": "journal-postmortem",
        "version": 1,
        "title": f"Postmortem: {timeline.journal}{part_title(part)}",
        "part": {"since": part.since, "plan_run": part.plan_run} if part else None,
        "date": start[:10] if start else None,
        "period": {
            "start": start,
            "end": end,
            "seconds": elapsed(start, end),
        },
        "journal": timeline.journal,
        "hosts": hosts_of(timeline),
        "status": status,
        "status_reasons": reasons,
        "story": {**told.as_dict(), "lines": lines(told)},
        "failures": failures_of(timeline, tails or {}, base_url),
        "summary": {
            "sentences": summary_sentences(
                findings, timeline, effect, start, end, headline=told.headline is None
            ),
            "notes": [note_dict(n) for n in notes if "summary" in n.tags],
        },
        "impact": effect,
        "charts": [
            {
                "title": c.title,
                "metric": c.name,
                "unit": c.unit,
                "throughput": bool(c.series) and c.series[0].higher_is_better,
                "svg": str(c.svg),
            }
            for c in (charts_of(timeline) if charts is None else charts)
        ],
        "timeline": [
            entry(item, start, by_run, lambda run: run_url(base_url, timeline.journal, run))
            for item in timeline.items
        ],
        "changes": changed,
        "pitfalls": [pitfall_dict(f, timeline) for f in findings],
        "root_causes": [note_dict(n) for n in notes if "root-cause" in n.tags],
        "trigger": [note_dict(n) for n in notes if "trigger" in n.tags],
        "action_items": action_items(findings, notes, journal=timeline.journal, base_url=base_url),
        "lessons": [note_dict(n) for n in notes if "lesson" in n.tags],
        "supporting": {
            "commands": [
                {
                    "time": run.started,
                    "step": run.step,
                    "host": run.host,
                    "run": run.run_id,
                    "command": run.command,
                    "status": run.status,
                    "exit_code": run.exit_code,
                    "imported": run.imported,
                }
                for run in runs
            ],
            "versions": versions(timeline, outputs or {}, changed),
            "record": {
                "journal_version": journal_version,
                "events": timeline.events,
                "last_event": timeline.last_ts,
            },
        },
    }


def part_title(part: Part | None) -> str:
    """`` (since 2026-11-28 00:00 UTC)``, `` (plan run 1a2b…)`` or both; nothing for a
    whole journal."""
    if not part:
        return ""
    said = [f"plan run {part.plan_run}"] if part.plan_run else []
    if part.since:
        said.append(f"since {part.since[:16].replace('T', ' ')} UTC")
    return f" ({', '.join(said)})"


def failures_of(
    timeline: Timeline, tails: Mapping[str, dict[str, Any]], base_url: str | None
) -> list[dict[str, Any]]:
    """Each step run that did not succeed, with the tail of its stderr (``tails``)."""
    out = []
    for run in failed_runs(timeline):
        tail = tails.get(run.run_id) or {"lines": [], "before": 0}
        out.append(
            {
                "run": run.run_id,
                "step": run.step,
                "host": run.host,
                "time": run.started,
                "status": run.status,
                "exit_code": run.exit_code,
                "command": run.command,
                "url": run_url(base_url, timeline.journal, run.run_id),
                "stderr": list(tail["lines"]),
                "stderr_before": tail["before"],
            }
        )
    return out


def charts_of(timeline: Timeline) -> list[Any]:
    """The charts of the journal's figures (:mod:`journal.export.chart`)."""
    from journal.export.chart import charts_of as charts

    return list(charts(timeline))


def hosts_of(timeline: Timeline) -> list[dict[str, Any]]:
    """The runbook's hosts, then any other host that ran a step, with their run counts."""
    runs = timeline.step_runs()
    names = list(dict.fromkeys([*timeline.hosts, *(r.host for r in runs)]))
    out = []
    for name in names:
        mine = [r for r in runs if r.host == name]
        target = timeline.hosts.get(name) or (mine[0].target if mine else "")
        out.append(
            {
                "name": name,
                "target": target,
                "step_runs": len(mine),
                "failed": sum(1 for r in mine if r.status not in (*DONE, "running")),
            }
        )
    return out


def latest_runs(timeline: Timeline) -> dict[tuple[str, str], StepRunView]:
    """The latest run of each (step, host), benchmark runs aside."""
    latest: dict[tuple[str, str], StepRunView] = {}
    for run in timeline.step_runs():
        if run.benchmark is None and not run.metrics:
            if stands(run, latest.get((run.step, run.host))):  # not started: changed nothing
                latest[(run.step, run.host)] = run
    return latest


def status_of(findings: list[Finding], timeline: Timeline) -> tuple[str, list[str]]:
    """``running`` while a step runs; else ``open`` while an error is open (or the latest run
    of a step failed), ``mitigated`` while only warnings are, ``resolved`` when neither is;
    and the sentences that say why."""
    reasons = []
    running = [r for r in timeline.step_runs() if r.status == "running"]
    for run in running:
        reasons.append(f"{run.step} is still running on {run.host}.")
    opened = [f for f in findings if f.is_open]
    errors = [f for f in opened if f.severity == "error"]
    warnings = [f for f in opened if f.severity == "warning"]
    for worry, word in ((errors, "error"), (warnings, "warning")):
        if worry:
            reasons.append(
                f"{_n(len(worry), word)} open: "
                + ", ".join(dict.fromkeys(f"{f.id} on {f.host}" for f in worry))
                + "."
            )
    failing = []
    for run in latest_runs(timeline).values():
        if run.status not in (*DONE, "running"):
            code = f", exit status {run.exit_code}" if run.exit_code is not None else ""
            failing.append(f"The latest run of {run.step} on {run.host} {run.status}{code}.")
    reasons += failing
    resolved = sum(1 for f in findings if f.state == "resolved")
    acked = sum(1 for f in findings if f.state == "acknowledged")
    infos = sum(1 for f in opened if f.severity == "info")
    settled = []
    if resolved:
        settled.append(f"{_n(resolved, 'finding')} resolved by what came later in the record")
    if acked:
        settled.append(f"{acked} acknowledged")
    if infos:
        settled.append(f"{_n(infos, 'info finding')} left as action items")
    if settled:
        reasons.append("; ".join(settled)[:1].upper() + "; ".join(settled)[1:] + ".")
    if running:
        return "running", reasons
    if errors or failing:
        return "open", reasons
    if warnings:
        return "mitigated", reasons
    if not findings:
        reasons.append("No findings: nothing to resolve or acknowledge.")
        if timeline.step_runs():
            reasons.append("The latest run of every step went through.")
    elif not settled:
        reasons.append(
            "No warning or error was found, and the latest run of every step went through."
        )
    return "resolved", reasons


def _n(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _span(seconds: float | None) -> str:
    if seconds is None:
        return ""
    from journal.display import seconds as shown

    return shown(seconds)


def summary_sentences(
    findings: list[Finding],
    timeline: Timeline,
    effect: dict[str, Any],
    start: str | None,
    end: str | None,
    *,
    headline: bool = True,
) -> list[str]:
    """What happened, in a few sentences made from the record (the headline throughput change
    too, unless ``headline`` is false: the story above them tells it)."""
    from journal.display import when

    runs = timeline.step_runs()
    benches = [r for r in runs if r.benchmark is not None or r.metrics]
    hosts = list(dict.fromkeys(r.host for r in runs)) or list(timeline.hosts)
    # by identity: a run's view compared field by field with every benchmark's is quadratic
    bench_ids = {id(r) for r in benches}
    steps = list(dict.fromkeys(r.step for r in runs if id(r) not in bench_ids))
    out = []
    if runs:
        bench = f" and {_n(len(benches), 'benchmark run')}" if benches else ""
        out.append(
            f"{_n(len(runs) - len(benches), 'step run')} of {_n(len(steps), 'step')}{bench} "
            f"on {_n(len(hosts), 'host')} ({', '.join(hosts)}), from {when(start)} to "
            f"{when(end)} ({_span(elapsed(start, end))})."
        )
    else:
        out.append(f"No step was run; the record holds {_n(len(timeline.items), 'item')}.")
    imported = [r for r in runs if r.imported]
    if imported:
        out.append(
            f"{_n(len(imported), 'command')} came from an imported terminal transcript "
            "(their times are the import's, their exit statuses unknown)."
        )
    failed = [r for r in runs if r.status not in (*DONE, "running")]
    if failed:
        shown = ", ".join(f"{r.step} on {r.host} ({r.status})" for r in failed[:5])
        more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
        still = [r for r in latest_runs(timeline).values() if r.status not in (*DONE, "running")]
        after = (
            f"; still failing: {', '.join(f'{r.step} on {r.host}' for r in still)}"
            if still
            else "; each step's latest run went through"
        )
        out.append(f"{_n(len(failed), 'run')} did not succeed: {shown}{more}{after}.")
    elif runs:
        out.append("No step run failed.")
    for status, why, reason in (
        ("skipped", "the host cannot run it", True),
        ("not started", "stopped before the command was launched: nothing of it ran", False),
    ):
        these = [r for r in runs if r.status == status]
        if these:
            shown = ("; " if reason else ", ").join(
                f"{r.step} on {r.host}" + (f" ({r.reason or 'no reason'})" if reason else "")
                for r in these[:5]
            )
            more = f" and {len(these) - 5} more" if len(these) > 5 else ""
            out.append(f"{_n(len(these), 'run')} {status}, not failed ({why}): {shown}{more}.")
    if findings:
        counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
        told = ", ".join(f"{n} {s}" for s, n in reversed(counts.items()) if n)
        states = {s: sum(1 for f in findings if f.state == s) for s in STATES}
        out.append(
            f"{_n(len(findings), 'pitfall')} hit ({told}): "
            f"{', '.join(dict.fromkeys(f.id for f in findings))}; "
            f"{states['resolved']} resolved, {states['acknowledged']} acknowledged, "
            f"{states['open']} open."
        )
    else:
        out.append("No pitfall was found.")
    told = headline_text(effect) if headline else None
    if told:
        out.append(told)
    return out


#: The formats of the export, as `--format` and the web's URLs name them.
FORMATS = ("md", "html", "json")


def of_journal(
    store: Any,
    journal: str,
    findings: list[Finding] | None = None,
    timeline: Timeline | None = None,
    base_url: str | None = None,
) -> dict[str, Any]:
    """The postmortem of a journal of ``store`` (judged here unless given, as the web's cache
    gives them), with the output of its runs without snapshots read for their changes;
    ``base_url`` where the web serves the journal, for links to run pages."""
    from journal.export.changes import failures, read_outputs

    if findings is None or timeline is None:
        from journal.service.findings import journal_findings

        findings, timeline = journal_findings(store, journal)
    return build(
        findings,
        timeline,
        outputs=read_outputs(store, journal, timeline),
        tails=failures(store, timeline),
        base_url=base_url,
    )


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def to_json(doc: dict[str, Any]) -> str:
    """The JSON export: the document itself."""
    import json

    return json.dumps(_finite(doc), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render(doc: dict[str, Any], fmt: str, chart_links: list[tuple[str, str]] | None = None) -> str:
    """The document in one of :data:`FORMATS`."""
    if fmt == "json":
        return to_json(doc)
    if fmt == "html":
        from journal.export import html

        return html.render(doc)
    if fmt == "md":
        from journal.export import markdown

        return markdown.render(doc, chart_links)
    raise ValueError(f"unknown postmortem format {fmt!r}")
