"""The exports (docs/cli-export.md): `journal export postmortem`, the journal's postmortem as
Markdown, HTML or JSON, and `journal export cast`, a step run's output as an asciicast.

Without ``-o`` the document goes to standard output. ``--format`` defaults to what ``-o``'s
suffix names (``.md``, ``.html``/``.htm``, ``.json``), else Markdown. With ``-o FILE.md`` the
charts of the throughput figures are also written as SVG files to ``FILE-charts/`` and linked
from the document (Markdown cannot hold an SVG portably; the tables are there either way, and
the HTML export holds every chart).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from array import array
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from journal.cli.context import Context, base_url_of
from journal.errors import BadInput
from journal.paths import output_file, write_lines
from journal.projections.period import find_plan_run, plan_span, since_moment
from journal.projections.rollouts import rollouts
from journal.runs import ShortIds
from journal.service.runs import find_stored_run

#: File suffixes and the format each names.
SUFFIXES = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".json": "json"}
#: The chart files this command writes (and replaces on the next export to the same file).
CHART_FILE = re.compile(r"^\d{2}-[a-z0-9-]*\.svg$")
SVG_NS = 'xmlns="http://www.w3.org/2000/svg"'


#: The postmortem printed on stdout is held in memory up to this size, then on disk.
SPOOL_BYTES = 8 * 1024 * 1024


def postmortem(ctx: Context, args: argparse.Namespace) -> int:
    from journal.export import postmortem as export
    from journal.export.gather import BATCH_ITEMS, items_of, stored
    from journal.projections.digest import Digest, digest
    from journal.projections.period import Part
    from journal.projections.stored import item_key

    base_url = base_url_of(args)
    output = output_file(Path(args.output), "the postmortem") if args.output else None
    fmt = args.format or (SUFFIXES.get(output.suffix.lower()) if output else None) or "md"
    journal = ctx.read_journal()
    ctx.require_db()
    since = _since(args.since)

    def written(found: Digest) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        # the stored timeline and findings read a batch at a time, the document written as
        # it is made: a year's journal is never held whole
        if not found.item_count:
            raise BadInput(
                f"the journal {journal!r} holds nothing to write a postmortem about yet: no "
                "step run, probe, figure or note (`journal run step NAME` or `journal import "
                "transcript FILE --host H` records some)"
            )
        source = stored(ctx.store, journal, found)
        known = found.plan_runs_near(args.plan_run) if args.plan_run is not None else []
        part = Part(since, _plan_run(journal, known, args.plan_run))
        span, starts = ("", ""), ["i:"]
        if part.plan_run:  # from its first run to its end
            runs = found.plan_runs_of(part.plan_run)
            span = plan_span(runs, part.plan_run)
            starts.append(item_key(runs[0]))
        if part.since:  # from the last item before the moment (one placed after it may be)
            starts.append(found.item_before(ctx.store.seq_since(journal, part.since)))
        start, until = max(starts), span[1] or None

        def batches() -> Any:
            return found.part_batches(start, until, BATCH_ITEMS)

        listing = source.findings
        entries = _Entries()
        spools.append(entries.file)

        def findings_of(gathered: Any) -> Any:
            if not part:
                return listing
            first, last = gathered.first_seq, gathered.last_seq
            return listing.ledger.part_listing(gathered.run_ids, first, last)

        try:
            doc = export.document(
                source,
                lambda: items_of(source, part or None, span, batches if part else None),
                findings_of,
                base_url=base_url,
                part=part or None,
                keep=entries.keep,
                made=entries.made,
                column=lambda: array("q"),
                rollouts=rollouts(ctx.store, journal).all(),
            )
        except export.Empty:
            raise BadInput(
                f"the journal {journal!r} holds nothing{export.part_title(part)} to write a "
                "postmortem about: no step run, probe, figure or note"
            ) from None
        short = ShortIds(ctx.store.id_neighbours)
        if output is None:
            # held aside (on disk past a few MB) until the whole read stands: a read begun
            # again, because another process saved the journal meanwhile, prints nothing twice
            held = tempfile.SpooledTemporaryFile(SPOOL_BYTES, mode="w+", encoding="utf-8")
            spools.append(held)
            export.write(doc, fmt, held.write, None, short)
            return doc, None
        try:
            shown = [chart for chart in doc["charts"] if chart["throughput"]]
            links = write_charts(output, shown) if fmt == "md" else None
            with output.open("w", encoding="utf-8") as file:
                export.write(doc, fmt, file.write, links, short)
        except OSError as exc:
            raise BadInput(
                f"cannot write the postmortem to {output}: {exc.strerror or exc}"
            ) from None
        return doc, links

    spools: list[Any] = []
    try:
        doc, links = digest(ctx.store, journal, written)
        if output is None:
            spools[-1].seek(0)
            shutil.copyfileobj(spools[-1], sys.stdout)
            return 0
    finally:
        for held in spools:
            held.close()
    charts = f" and {len(links)} charts in {output.stem}-charts/" if links else ""
    found = len(doc["pitfalls"])
    print(
        f"wrote {output}{charts}: the {fmt} postmortem of {journal} ({doc['status']}, "
        f"{found} pitfall{'' if found == 1 else 's'}, {len(doc['timeline'])} timeline items)"
    )
    return 0


class _Entries:
    """The change entries of a postmortem held aside until they are written: each as compact
    JSON in a spooled file (memory up to a few MB, then disk), where :meth:`keep` puts it and
    :meth:`made` makes it again as it was (its keys are text, its numbers round-trip); what
    is held per entry is its number, and where it ends in the file."""

    def __init__(self) -> None:
        self.file = tempfile.SpooledTemporaryFile(SPOOL_BYTES, mode="w+b")
        self.ends = array("q")

    def keep(self, entry: dict[str, Any]) -> int:
        data = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
        self.file.seek(0, 2)
        self.file.write(data.encode("utf-8"))
        self.ends.append(self.file.tell())
        return len(self.ends) - 1

    def made(self, number: int) -> Any:
        start = self.ends[number - 1] if number else 0
        self.file.seek(start)
        return json.loads(self.file.read(self.ends[number] - start))


def _since(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return since_moment(text)
    except ValueError as exc:
        raise BadInput(f"--since: {exc}") from None


def _plan_run(journal: str, known: list[str], wanted: str | None) -> str | None:
    if wanted is None:
        return None
    try:
        return find_plan_run(SimpleNamespace(journal=journal), wanted, known)  # type: ignore[arg-type]
    except ValueError as exc:
        raise BadInput(f"--plan-run: {exc}") from None


def cast(ctx: Context, args: argparse.Namespace) -> int:
    from journal.export.cast import stream_cast

    output = output_file(Path(args.output), "the asciicast")
    journal = ctx.read_journal()
    run, _ = find_stored_run(ctx.store, journal, args.run_id)
    records = ctx.store.read(journal, run_id=run, types=["StepStarted", "OutputChunk"])
    lines = write_lines(output, stream_cast(records), "the asciicast")
    print(f"wrote {output}: {lines - 1} output events of run {run}")
    return 0


def write_charts(output: Path, charts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each chart as ``FILE-charts/NN-title.svg`` beside ``output``; (title, relative path)."""
    if not charts:
        return []
    folder = output.with_name(f"{output.stem}-charts")
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        if CHART_FILE.match(old.name):
            old.unlink()
    links = []
    for i, chart in enumerate(charts, 1):
        slug = re.sub(r"[^a-z0-9]+", "-", chart["title"].lower()).strip("-")[:60]
        name = f"{i:02d}-{slug}.svg"
        svg = chart["svg"]
        if "xmlns=" not in svg.split(">", 1)[0]:
            svg = svg.replace("<svg", f"<svg {SVG_NS}", 1)  # a file needs it, inline SVG not
        (folder / name).write_text(svg + "\n", encoding="utf-8")
        links.append((chart["title"], f"{folder.name}/{name}"))
    return links
