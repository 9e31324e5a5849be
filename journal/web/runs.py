"""The step-run page: the command, host, env and timing; the output, a page of lines at a
time with ANSI colours; the package diff, probes, expectations and findings.

``/j/<journal>/run/<run_id>/output?page=N`` answers with one page of lines (the "load more"
fragment); ``?after=SEQ`` with the lines of the chunks stored after event SEQ, for live
appending.
"""

from __future__ import annotations

from flask import Blueprint, abort, current_app, render_template, request

from journal.pitfalls.base import Finding
from journal.projections.packages import KINDS
from journal.web.output import OutputSpans, SpanCache, lines_after, read_lines
from journal.web.state import JournalState, journal_or_404, store
from journal.web.templating import wants_fragment

bp = Blueprint("runs", __name__, url_prefix="/j/<journal>/run/<run_id>")

_SPANS = SpanCache()


def _run_or_404(state: JournalState, run_id: str):  # type: ignore[no-untyped-def]
    run = state.run(run_id)
    if run is None:
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


def _page_context(state: JournalState, run_id: str, page: int) -> dict:  # type: ignore[type-arg]
    per_page = current_app.config["LINES_PER_PAGE"]
    layout: OutputSpans = _SPANS.get(store(), run_id)
    pages = layout.pages(per_page)
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
    }


@bp.get("")
def page(journal: str, run_id: str) -> str:
    state = journal_or_404(journal)
    run = _run_or_404(state, run_id)
    context = _page_context(state, run_id, request.args.get("page", 1, type=int))
    if wants_fragment():
        return render_template("runs/_output_lines.html", **context)
    findings = state.findings_of(run_id)
    elsewhere = [
        f for f in state.findings if f.run != run_id and any(ev.run == run_id for ev in f.evidence)
    ]
    return render_template(
        "runs/page.html",
        state=state,
        run=run,
        diff=run.diff,
        kinds=KINDS,
        findings=findings,
        elsewhere=elsewhere,
        runs=state.timeline.runs,
        **context,
    )


@bp.get("/output")
def output(journal: str, run_id: str) -> str:
    """A page of lines (``page=N``), or the lines since event ``after=SEQ``."""
    state = journal_or_404(journal)
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
