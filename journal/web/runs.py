"""The step-run page: the command, host, env and timing; the output, a page of lines at a
time with ANSI colours; the package diff, probes, expectations and findings.

``/j/<journal>/run/<run_id>/output?page=N`` answers with one page of lines (the "load more"
fragment); ``?after=SEQ`` with the lines of the chunks stored after event SEQ.
``/j/<journal>/run/<run_id>/live?after=SEQ`` streams those lines as they are printed
(Server-Sent Events: ``lines`` messages, then ``done`` once the step finished, carrying the
run's summary as it ended), which a running step's page follows.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from contextlib import closing
from typing import Any

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    redirect,
    render_template,
    request,
    url_for,
)

from journal.errors import BadInput
from journal.events import NotificationSent
from journal.export.cast import stream_cast
from journal.output import decode
from journal.pitfalls.base import Finding
from journal.projections.notifications import deliveries
from journal.projections.packages import KINDS
from journal.projections.timeline import StepRunView
from journal.projections.unread import of_run
from journal.runs import IMPORTED, RUNNING, SKIPPED, SUCCEEDED
from journal.service.runs import find_stored_run
from journal.web.output import OutputSpans, SpanCache, lines_after, read_lines
from journal.web.sse import after_seq, event_stream, message
from journal.web.state import JournalState, store, stored_or_404
from journal.web.templating import wants_fragment

bp = Blueprint("runs", __name__, url_prefix="/j/<journal>/run/<run_id>")

_SPANS = SpanCache()


def _run_or_404(state: JournalState, run_id: str) -> StepRunView:
    """The run ``run_id`` names; a unique start of a run's id (as pages and the command line
    show ids) or a step's name (its latest run) is sent on to the run's own address."""
    run = state.run(run_id)
    if run is None:
        try:
            whole, _ = find_stored_run(store(), state.journal, run_id)
        except BadInput as exc:
            abort(404, str(exc))
        if whole != run_id:
            args = {**(request.view_args or {}), "run_id": whole, **request.args}
            abort(redirect(url_for(request.endpoint or "runs.page", **args)))
        abort(404, f"the journal {state.journal!r} has no step run {run_id!r}")
    return run


def _evidence_lines(findings: list[Finding], run_id: str) -> dict[int, list[str]]:
    """Line number -> ids of the findings whose evidence is that line of this run."""
    lines: dict[int, list[str]] = {}
    for found in findings:
        for ev in found.evidence:
            if ev.run == run_id and ev.line is not None:
                lines.setdefault(ev.line, []).append(found.id)
    return lines


def _page_context(state: JournalState, run_id: str, page: int | None) -> dict[str, Any]:
    """One page of a run's output (``None``: the first, or the last while the step runs:
    its newest lines are what a live view is for)."""
    per_page = current_app.config["LINES_PER_PAGE"]
    layout: OutputSpans = _SPANS.get(store(), run_id)
    pages = layout.pages(per_page)
    run = state.run(run_id)
    live = run is not None and run.status == "running"
    if page is None:
        page = pages if live else 1
    page = min(max(page, 1), pages)
    first = (page - 1) * per_page + 1
    last = min(page * per_page, layout.lines)
    return {
        "journal": state.journal,
        "run_id": run_id,
        "layout": layout,
        "page": page,
        "pages": pages,
        "lines": read_lines(store(), run_id, layout, first, last) if layout.lines else [],
        "next_page": page + 1 if page < pages else None,
        "evidence": _evidence_lines(state.findings, run_id),
        "per_page": per_page,
        # only the last page follows the step: the lines it prints come after it
        "follow": live and page == pages,
    }


def _summary_context(state: JournalState, run: StepRunView) -> dict[str, Any]:
    """What the page shows of a run besides its output (``runs/_summary.html``)."""
    run_id = run.run_id
    elsewhere = [
        f for f in state.findings if f.run != run_id and any(ev.run == run_id for ev in f.evidence)
    ]
    return {
        "state": state,
        "journal": state.journal,
        "run": run,
        "diff": state.diff(run),
        "kinds": KINDS,
        "findings": state.findings_of(run_id),
        "elsewhere": elsewhere,
        "runs": state.timeline.runs,
        "rollback_command": rollback_command(state, run),
        "unread": of_run(run),
        "notifications": deliveries(
            store().read(state.journal, run_id=run_id, types=[NotificationSent.type])
        ),
        **_neighbours(state, run),
    }


def rollback_command(state: JournalState, run: StepRunView) -> str | None:
    """The `journal rollback` that puts the run's host back to its packages before it (the
    page offers it to copy; the UI itself changes nothing): ``before:STEP`` when that names
    this run (the first try of the step's latest attempt on the host), else ``before:RUN``.
    None for a run with no snapshot before it, an imported or a benchmark run."""
    if run.imported or run.benchmark is not None or "before" not in run.snapshots:
        return None
    to = run.step if state.rollback_first_try(run) else run.run_id
    return f"journal rollback --to {shlex.quote('before:' + to)} --host {shlex.quote(run.host)}"


def _neighbours(state: JournalState, run: StepRunView) -> dict[str, StepRunView | None]:
    """The runs a run's page links to: the step run before and after it on its host, and
    (the same step on the same host, next or last) the retry of a failed run, or the failed
    run a run retried."""
    before, after, earlier, later = state.neighbours(run)
    return {
        "previous_run": before,
        "next_run": after,
        "retried_by": later if later is not None and not _succeeded(run) else None,
        "retry_of": earlier if earlier is not None and not _succeeded(earlier) else None,
    }


def _succeeded(run: StepRunView) -> bool:
    """Whether a run ended well (or is still running: nothing to retry yet; or skipped: its
    host cannot run it, a retry there changes nothing)."""
    return run.status in (SUCCEEDED, RUNNING, IMPORTED, SKIPPED)


@bp.get("")
def page(journal: str, run_id: str) -> str:
    state = stored_or_404(journal)
    run = _run_or_404(state, run_id)
    context = _page_context(state, run_id, request.args.get("page", type=int))
    if wants_fragment():
        return render_template("runs/_output_lines.html", **context)
    return render_template("runs/page.html", **{**_summary_context(state, run), **context})


@bp.get("/output")
def output(journal: str, run_id: str) -> str:
    """A page of lines (``page=N``), or the lines since event ``after=SEQ``."""
    state = stored_or_404(journal)
    _run_or_404(state, run_id)
    after = request.args.get("after", type=int)
    if after is not None:
        layout = _SPANS.get(store(), run_id)
        return render_template(
            "runs/_output_lines.html",
            journal=journal,
            run_id=run_id,
            layout=layout,
            lines=lines_after(store(), run_id, layout, after),
            next_page=None,
            evidence=_evidence_lines(state.findings, run_id),
            live=True,
        )
    context = _page_context(state, run_id, request.args.get("page", 1, type=int))
    return render_template("runs/_output_lines.html", **context)


@bp.get("/raw")
def raw(journal: str, run_id: str) -> Response:
    """The run's output as it was recorded, byte for byte (both streams, in order), streamed
    a few chunks at a time: where a line too long for the page is read whole."""
    state = stored_or_404(journal)
    _run_or_404(state, run_id)
    chunks = store().output_chunks(run_id)

    def body() -> Iterator[bytes]:
        for _, chunk in chunks:
            yield decode(chunk)

    return Response(
        body(),
        mimetype="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="{run_id}.out"'},
    )


@bp.get("/cast")
def cast(journal: str, run_id: str) -> Response:
    """The run's output as an asciicast v2 file (``asciinema play``), written as its events
    are read: one line per recorded chunk, never the whole output held at once."""
    state = stored_or_404(journal)
    _run_or_404(state, run_id)
    records = store().read(journal, run_id=run_id, types=["StepStarted", "OutputChunk"])

    def body() -> Iterator[str]:
        with closing(records):
            for line in stream_cast(records):
                yield line + "\n"

    return Response(
        body(),
        mimetype="application/x-asciicast",
        headers={"Content-Disposition": f'attachment; filename="{run_id}.cast"'},
    )


@bp.get("/live")
def live(journal: str, run_id: str) -> Response:
    """The run's output as it is printed: ``lines`` messages with the lines of the chunks
    after ``after=SEQ`` (a line begun before comes whole, marked to replace the one shown),
    then, once the step finished (or its recorder is gone), ``done`` with its summary."""
    state = stored_or_404(journal)
    run = _run_or_404(state, run_id)
    sent = seen = after_seq()
    checked = 0.0
    alive = store().liveness()  # the recorder's heartbeat, on whichever machine it runs

    def poll() -> tuple[list[str], bool]:
        nonlocal sent, seen, checked
        newest, finished = _progress(run_id, seen)
        if not newest and not finished:
            now = time.monotonic()
            if now - checked < 1.0:
                return [], False
            checked = now
            if alive(run.machine, run.pid):
                return [], False
            # the recorder is gone: a StepFinished it wrote on its way out, or none
            newest, finished = _progress(run_id, seen)
            if not newest and not finished:
                return [_done(journal, run_id, sent)], True
        out = []
        layout = _SPANS.get(store(), run_id)
        if layout.last_seq > sent:
            lines = lines_after(store(), run_id, layout, sent)
            html = render_template(
                "runs/_output_lines.html",
                journal=journal,
                run_id=run_id,
                layout=layout,
                lines=lines,
                next_page=None,
                evidence={},
                live=True,
            )
            sent = layout.last_seq
            out.append(message("lines", html, sent))
        seen = max(seen, newest, sent)
        if finished:  # a run's chunks all come before its StepFinished: every line is sent
            out.append(_done(journal, run_id, sent))
        return out, bool(finished)

    return event_stream(poll, current_app.config["LIVE_RUN_S"])


def _progress(run_id: str, after: int) -> tuple[int, int]:
    """The newest event of a run after ``after`` (0: none), and its StepFinished (0: none)."""
    return store().run_progress(run_id, after)


def _done(journal: str, run_id: str, sent: int) -> str:
    """The closing message: the run's summary as it ended, swapped in place of the one shown
    (the page's ``sse-close="done"`` then closes the stream)."""
    state = stored_or_404(journal)
    run = _run_or_404(state, run_id)
    html = render_template("runs/_summary.html", oob=True, **_summary_context(state, run))
    per_page = current_app.config["LINES_PER_PAGE"]
    layout = _SPANS.get(store(), run_id)
    html += render_template(
        "runs/_legend.html",
        oob=True,
        layout=layout,
        page=layout.pages(per_page),  # the page followed was the last
        pages=layout.pages(per_page),
        per_page=per_page,
    )
    return message("done", html, sent)
