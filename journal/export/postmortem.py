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
  there with ``unread``: what it changed is not known. ``install`` says whether the run's
  command asks an installer for packages: the Markdown and HTML list an install that changed
  nothing (a no-op install) and count the other runs that changed nothing by step, in one
  line per host (:func:`journal.export.changes.told`).
- ``rollouts``: each gated rollout begun in the period (``journal status``'s ``rollout`` keys,
  its ``url`` and the ``failed`` checks of the batch where it stopped), in the order begun.
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
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

from journal.export.changes import HostChanges, versions_of
from journal.export.entries import elapsed, entry, note_dict
from journal.export.findings import Actions, pitfall_dict, run_url
from journal.export.gather import (
    Gathered,
    Judged,
    Source,
    command_of,
    gather,
    judge,
)
from journal.export.impact import headline_text, impact
from journal.pitfalls.base import Finding
from journal.projections.period import Part
from journal.projections.timeline import StepRunView, Timeline
from journal.runs import DONE
from journal.streamed import Lazy, Write, held, write_json


class Empty(ValueError):
    """A part of a journal without items (nothing to write a postmortem about)."""

    def __init__(self, part: Part) -> None:
        super().__init__(part)
        self.part = part


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
    rollouts: list[Any] | None = None,
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
    source = Source.held(findings, timeline, outputs or {}, tails or {})
    doc = document(
        source,
        lambda: timeline.items,
        lambda gathered: findings,
        part=part,
        charts=charts,
        journal_version=journal_version,
        base_url=base_url,
        rollouts=rollouts,
    )
    return held(doc)


def document(
    source: Source,
    items: Callable[[], Iterable[Any]],
    findings_of: Callable[[Gathered], Any],
    *,
    part: Part | None = None,
    charts: list[Any] | None = None,
    journal_version: str | None = None,
    base_url: str | None = None,
    keep: Callable[[dict[str, Any]], Any] = lambda entry: entry,
    made: Callable[[Any], dict[str, Any]] = lambda entry: entry,
    column: Callable[[], Any] = list,
    rollouts: list[Any] | None = None,
) -> dict[str, Any]:
    """The postmortem of the items ``items`` gives (a part's, in timeline order, read again
    for each long list) and of the findings ``findings_of`` gives once they are gathered (the
    part's: :meth:`journal.pitfalls.ledger.Ledger.part_listing`; :class:`Empty` for a part
    without items), its long lists
    (the timeline, the pitfalls, the commands) :class:`~journal.streamed.Lazy`: written as
    they are read (:func:`write`), or :func:`~journal.streamed.held` whole. ``keep`` and
    ``made`` hold each change entry (a long journal's as compact JSON) and make it again,
    ``column`` holds what ``keep`` gives of a host's entries; ``rollouts`` the journal's
    gated rollouts (:class:`journal.projections.rollouts.RolloutView`), those begun within the
    period told."""
    from journal.export.chart import charts_of as charts_of_figures
    from journal.service.story import lines, story

    if journal_version is None:
        from journal import __version__ as journal_version
    journal = source.journal

    changes = HostChanges(source.output, keep, column)
    gathered, facts = gather(source, items(), part, changes)
    if part and not gathered.count:
        raise Empty(part)
    findings = findings_of(gathered)
    actions = Actions()
    judged = judge(findings, actions)
    start, end = gathered.start, gathered.end
    steps = gathered.marks
    notes = gathered.notes
    effect = impact(gathered.metrics, steps)  # type: ignore[arg-type]
    changed = {host: Lazy.of(found, made) for host, found in changes.found.items()}
    status, reasons = status_of(judged, gathered)
    told = story(facts, judged.tally)
    if charts is None:
        charts = list(charts_of_figures(gathered.metrics, steps=steps))  # type: ignore[arg-type]
    mine = gathered.run_ids if part else None  # a part tells the times of its own runs

    def link(run: str) -> str | None:
        return run_url(base_url, journal, run)

    def timeline_entries() -> Iterator[dict[str, Any]]:
        for batch in _chunks(items(), LOOKUPS):
            by_run = source.finding_keys([i.run_id for i in batch if isinstance(i, StepRunView)])
            for item in batch:
                yield entry(item, start, by_run, link)

    def pitfalls() -> Iterator[dict[str, Any]]:
        for batch in _chunks(findings, LOOKUPS):
            runs = {r for f in batch for r in (f.run, f.resolved_by and f.resolved_by.run) if r}
            started = source.started([r for r in runs if mine is None or r in mine])
            for found in batch:
                yield pitfall_dict(found, started)

    def commands() -> Iterator[dict[str, Any]]:
        for item in items():
            if isinstance(item, StepRunView):
                yield command_of(item)

    listed = Lazy(commands, gathered.runs)
    listed.fence = gathered.fence  # the commands' block's, known before it is written
    return {
        "format": "journal-postmortem",
        "version": 1,
        "title": f"Postmortem: {journal}{part_title(part)}",
        "part": {"since": part.since, "plan_run": part.plan_run} if part else None,
        "date": start[:10] if start else None,
        "period": {
            "start": start,
            "end": end,
            "seconds": elapsed(start, end),
        },
        "journal": journal,
        "hosts": hosts_of(gathered),
        "status": status,
        "status_reasons": reasons,
        "story": {**told.as_dict(), "lines": lines(told)},
        "failures": failures_of(gathered, source.tail, base_url),
        "summary": {
            "sentences": summary_sentences(
                judged, gathered, effect, start, end, headline=told.headline is None
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
            for c in charts
        ],
        "timeline": Lazy(timeline_entries, gathered.count),
        "changes": changed,
        "rollouts": [
            rollout_dict(r, base_url, journal)
            for r in rollouts or []
            if not part or (start or "") <= r.started <= (end or r.started)
        ],
        "pitfalls": Lazy(pitfalls, judged.count),
        "root_causes": [note_dict(n) for n in notes if "root-cause" in n.tags],
        "trigger": [note_dict(n) for n in notes if "trigger" in n.tags],
        "action_items": actions.items(notes, journal=journal, base_url=base_url),
        "lessons": [note_dict(n) for n in notes if "lesson" in n.tags],
        "supporting": {
            "commands": listed,
            "versions": versions_of(
                [*gathered.hosts, *gathered.run_hosts],
                changes.packages,
                gathered.packages.get,
                gathered.probes.get,
            ),
            "record": {
                "journal_version": journal_version,
                "events": source.events,
                "last_event": source.last_ts,
            },
        },
    }


#: Timeline items and findings whose runs are looked up at a time, as the postmortem is written.
LOOKUPS = 200


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


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
    gathered: Gathered,
    tails: Callable[[str], dict[str, Any] | None],
    base_url: str | None,
) -> list[dict[str, Any]]:
    """Each step run that did not succeed, with the tail of its stderr (``tails``)."""
    out = []
    for run in gathered.failed:
        tail = tails(run["run"]) or {"lines": [], "before": 0}
        out.append(
            {
                **run,
                "url": run_url(base_url, gathered.journal, run["run"]),
                "stderr": list(tail["lines"]),
                "stderr_before": tail["before"],
            }
        )
    return out


def charts_of(timeline: Timeline) -> list[Any]:
    """The charts of the journal's figures (:mod:`journal.export.chart`)."""
    from journal.export.chart import charts_of as charts

    return list(charts(timeline))


def hosts_of(gathered: Gathered) -> list[dict[str, Any]]:
    """The runbook's hosts, then any other host that ran a step, with their run counts."""
    out = []
    for name in dict.fromkeys([*gathered.hosts, *gathered.run_hosts]):
        runs, failed, target = gathered.run_hosts.get(name, (0, 0, ""))
        out.append(
            {
                "name": name,
                "target": gathered.hosts.get(name) or target,
                "step_runs": runs,
                "failed": failed,
            }
        )
    return out


def status_of(judged: Judged, gathered: Gathered) -> tuple[str, list[str]]:
    """``running`` while a step runs; else ``open`` while an error is open (or the latest run
    of a step failed), ``mitigated`` while only warnings are, ``resolved`` when neither is;
    and the sentences that say why."""
    reasons = []
    for step, host in gathered.running:
        reasons.append(f"{step} is still running on {host}.")
    errors = judged.open.get("error", [0, {}])
    warnings = judged.open.get("warning", [0, {}])
    for worry, word in ((errors, "error"), (warnings, "warning")):
        if worry[0]:
            reasons.append(f"{_n(worry[0], word)} open: " + ", ".join(worry[1]) + ".")
    failing = []
    for step, host, status, exit_code in gathered.latest.values():
        if status not in (*DONE, "running"):
            code = f", exit status {exit_code}" if exit_code is not None else ""
            failing.append(f"The latest run of {step} on {host} {status}{code}.")
    reasons += failing
    resolved = judged.states["resolved"]
    acked = judged.states["acknowledged"]
    infos = judged.open.get("info", [0])[0]
    settled = []
    if resolved:
        settled.append(f"{_n(resolved, 'finding')} resolved by what came later in the record")
    if acked:
        settled.append(f"{acked} acknowledged")
    if infos:
        settled.append(f"{_n(infos, 'info finding')} left as action items")
    if settled:
        reasons.append("; ".join(settled)[:1].upper() + "; ".join(settled)[1:] + ".")
    if gathered.running:
        return "running", reasons
    if errors[0] or failing:
        return "open", reasons
    if warnings[0]:
        return "mitigated", reasons
    if not judged.count:
        reasons.append("No findings: nothing to resolve or acknowledge.")
        if gathered.runs:
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
    judged: Judged,
    gathered: Gathered,
    effect: dict[str, Any],
    start: str | None,
    end: str | None,
    *,
    headline: bool = True,
) -> list[str]:
    """What happened, in a few sentences made from the record (the headline throughput change
    too, unless ``headline`` is false: the story above them tells it)."""
    from journal.display import when

    runs, benches = gathered.runs, gathered.benches
    hosts = list(gathered.run_hosts) or list(gathered.hosts)
    out = []
    if runs:
        bench = f" and {_n(benches, 'benchmark run')}" if benches else ""
        out.append(
            f"{_n(runs - benches, 'step run')} of {_n(len(gathered.steps), 'step')}{bench} "
            f"on {_n(len(hosts), 'host')} ({', '.join(hosts)}), from {when(start)} to "
            f"{when(end)} ({_span(elapsed(start, end))})."
        )
    else:
        out.append(f"No step was run; the record holds {_n(gathered.count, 'item')}.")
    if gathered.imported:
        out.append(
            f"{_n(gathered.imported, 'command')} came from an imported terminal transcript "
            "(their times are the import's, their exit statuses unknown)."
        )
    failed = gathered.failed
    if failed:
        shown = ", ".join(f"{r['step']} on {r['host']} ({r['status']})" for r in failed[:5])
        more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
        still = [
            (step, host)
            for step, host, status, _ in gathered.latest.values()
            if status not in (*DONE, "running")
        ]
        after = (
            f"; still failing: {', '.join(f'{step} on {host}' for step, host in still)}"
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
        count, these = gathered.unstarted.get(status, (0, []))
        if count:
            shown = ("; " if reason else ", ").join(
                f"{step} on {host}" + (f" ({why_not or 'no reason'})" if reason else "")
                for step, host, why_not in these
            )
            more = f" and {count - 5} more" if count > 5 else ""
            out.append(f"{_n(count, 'run')} {status}, not failed ({why}): {shown}{more}.")
    if judged.count:
        told = ", ".join(f"{n} {s}" for s, n in reversed(judged.severities.items()) if n)
        states = judged.states
        out.append(
            f"{_n(judged.count, 'pitfall')} hit ({told}): "
            f"{', '.join(judged.ids)}; "
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
    from journal.projections.rollouts import rollouts as rollouts_of

    if findings is None or timeline is None:
        from journal.service.findings import journal_findings

        findings, timeline = journal_findings(store, journal)
    return build(
        findings,
        timeline,
        outputs=read_outputs(store, journal, timeline),
        tails=failures(store, timeline),
        base_url=base_url,
        rollouts=rollouts_of(store, journal).all(),
    )


def rollout_dict(rollout: Any, base_url: str | None, journal: str) -> dict[str, Any]:
    """A gated rollout as the postmortem tells it: how far it went, where it stopped and
    why, and the checks that failed there (a figure with its baseline)."""
    stopped = rollout.batches[rollout.batch - 1] if rollout.stopped and rollout.batch else None
    url = (
        f"{base_url}/j/{quote(journal, safe='')}/rollout/{quote(rollout.rollout, safe='')}"
        if base_url
        else None
    )
    return {
        **rollout.as_dict(),
        "url": url,
        "failed": [dict(c) for c in stopped.failed()] if stopped is not None else [],
    }


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
    return render(doc, "json")


def render(
    doc: dict[str, Any],
    fmt: str,
    chart_links: list[tuple[str, str]] | None = None,
    short: Callable[[str], str] = str,
) -> str:
    """The document in one of :data:`FORMATS`."""
    parts: list[str] = []
    write(doc, fmt, parts.append, chart_links, short)
    return "".join(parts)


def write(
    doc: dict[str, Any],
    fmt: str,
    out: Write,
    chart_links: list[tuple[str, str]] | None = None,
    short: Callable[[str], str] = str,
) -> None:
    """Write the document in one of :data:`FORMATS` to ``out`` as it is made: its long lists
    (:class:`~journal.streamed.Lazy`) an item at a time; run ids as ``short`` shows them in
    HTML and Markdown (:class:`journal.runs.ShortIds`), whole in JSON."""
    if fmt == "json":
        write_json(out, doc, ensure_ascii=False, allow_nan=False, plain=_finite)
        out("\n")
        return
    if fmt == "html":
        from journal.export import html

        html.write(doc, out, short)
        return
    if fmt == "md":
        from journal.export import markdown

        markdown.write(doc, out, chart_links, short)
        return
    raise ValueError(f"unknown postmortem format {fmt!r}")
