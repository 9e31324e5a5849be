"""The postmortem as Markdown (CommonMark with GitHub's tables and task lists).

Everything that came from a host (commands, output lines, versions, step names) is put in
code spans or fenced blocks whose fences are longer than any run of backticks inside, and
prose (notes, titles, advice) has Markdown's and HTML's special characters escaped, so that
nothing a host printed can add a link, an image or markup to the document.

Markdown cannot carry an SVG portably: the impact section always holds the figures as a
table, and where charts are given as files (``chart_links``: `journal export postmortem -o
FILE.md` writes them to ``FILE-charts/``) it links each as an image.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from journal.export.wording import (
    CODE_SPAN,
    EMPTY,
    elapsed,
    figure,
    outcome,
    percent_text,
    period,
    quiet_text,
    series_name,
    spread_text,
    stack_rows,
    told_changes,
    took,
    what,
    when,
)
from journal.runs import along
from journal.streamed import Lines, Write

_SPECIAL = re.compile(r"([\\`*_\[\]<|~&#])")
#: Characters special only where a line (or the text) starts: a quote or a list.
_LEADING = re.compile(r"^(>|[+\-](?= |$))")
_NUMBERED = re.compile(r"^(\d+)([.)])(?= |$)")


def _prose(value: str) -> str:
    return _SPECIAL.sub(r"\\\1", value)


def text(value: Any) -> str:
    """Prose on one line with Markdown's special characters escaped, but for the code spans it
    holds (```--reinstall```), kept as code: a code span shows its content literally, so
    nothing in it can add markup (``|`` aside, escaped for tables). ``>``, ``-``, ``+`` and
    ``1.`` are escaped only where they would start a quote or a list (``->`` stays so)."""
    line = " ".join(str(value).split())
    if not _SPECIAL.search(line) and not _LEADING.match(line) and not _NUMBERED.match(line):
        return line  # nothing to escape (most of a long timeline's words)
    out, at = [], 0
    for span in CODE_SPAN.finditer(line):
        out.append(_prose(line[at : span.start()]))
        out.append(span.group(0).replace("|", "\\|"))
        at = span.end()
    out.append(_prose(line[at:]))
    return _NUMBERED.sub(r"\1\\\2", _LEADING.sub(r"\\\1", "".join(out)))


def code(value: Any) -> str:
    """A code span holding ``value`` on one line (safe in a table cell too)."""
    content = " ".join(str(value).split())
    if not content:
        return "-"
    longest = max((len(run) for run in re.findall(r"`+", content)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if content[0] == "`" or content[-1] == "`" else ""
    return f"{fence}{pad}{content}{pad}{fence}".replace("|", "\\|")


def block(content: str, info: str = "text") -> list[str]:
    """A fenced code block, its fence longer than any run of backticks in ``content``."""
    longest = max((len(run) for run in re.findall(r"`{3,}", content)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{info}", content.rstrip("\n"), fence]


def table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    """A GitHub table; cells must already be escaped (:func:`text`, :func:`code`)."""
    return list(table_lines(header, rows))


def table_lines(header: list[str], rows: Iterable[list[str]]) -> Iterator[str]:
    """:func:`table`'s lines, a row at a time."""
    yield "| " + " | ".join(header) + " |"
    yield "|" + "---|" * len(header)
    for row in rows:
        yield "| " + " | ".join(cell or "-" for cell in row) + " |"


def fence_run(line: str) -> int:
    """The longest run of three backticks or more in ``line`` (0: none)."""
    return max((len(run) for run in re.findall(r"`{3,}", line)), default=0)


def _stripped(lines: Iterable[str]) -> Iterator[str]:
    """``lines`` such that joined by newlines they are ``"\\n".join(lines).rstrip("\\n")``:
    from the last line with more than newlines in it, only those lines are held."""
    held: list[str] = []  # the last line with text (when one came), and the newlines after it
    seen = False
    for line in lines:
        if line.strip("\n"):
            yield from held
            held, seen = [line], True
        else:
            held.append(line)
    yield held[0].rstrip("\n") if seen else ""


def _empty(key: str) -> list[str]:
    return [f"_{text(EMPTY[key])}_", ""]


def _note(note: dict[str, Any]) -> str:
    by = ", ".join(x for x in (note["author"], when(note["time"])) if x)
    host = f" on {code(note['host'])}" if note["host"] else ""
    return f"- {text(note['text'])} ({text(by)}{host})"


def _notes(notes: list[dict[str, Any]], key: str) -> list[str]:
    if not notes:
        return _empty(key)
    return [*(_note(n) for n in notes), ""]


def render(doc: dict[str, Any], chart_links: list[tuple[str, str]] | None = None) -> str:
    """The Markdown document; ``chart_links`` are (title, relative path) of chart files."""
    parts: list[str] = []
    write(doc, parts.append, chart_links)
    return "".join(parts)


def write(
    doc: dict[str, Any],
    out: Write,
    chart_links: list[tuple[str, str]] | None = None,
    short: Callable[[str], str] = str,
) -> None:
    """Write the Markdown document to ``out`` a section at a time (the timeline, the
    pitfalls and the commands a line at a time), run ids as ``short`` shows them
    (:class:`journal.runs.ShortIds`; the JSON keeps them whole)."""
    lines = Lines(out)
    hosts = ", ".join(f"{code(h['name'])} ({text(h['target'])})" for h in doc["hosts"])
    out = [
        f"# {text(doc['title'])}",
        "",
        *table(
            ["", ""],
            [
                ["**Date**", text(doc["date"] or "-")],
                ["**Period**", text(period(doc))],
                ["**Journal**", code(doc["journal"])],
                ["**Hosts**", hosts or "-"],
                ["**Status**", f"**{doc['status']}**: " + text(" ".join(doc["status_reasons"]))],
            ],
        ),
        "",
        "## Summary",
        "",
        *_story(doc),
        *(text(s) for s in doc["summary"]["sentences"]),
        "",
    ]
    for note in doc["summary"]["notes"]:
        out += [text(note["text"]), ""]
    lines.add(out)
    lines.add(_impact(doc, chart_links))  # a year's changes: not held while the rest is written
    lines.add(_timeline(doc, short))
    lines.add(_failures(doc, short))
    lines.add(_changes(doc))
    lines.add(_rollouts(doc, short))
    lines.add(_pitfalls(doc, short))
    lines.add(["## Root causes", "", *_notes(doc["root_causes"], "root_causes")])
    lines.add(["## Trigger", "", *_notes(doc["trigger"], "trigger")])
    lines.add(_actions(doc, short))
    lines.add(["## Lessons learned", "", *_notes(doc["lessons"], "lessons")])
    lines.add(_supporting(doc, short))
    lines.end()


def _story(doc: dict[str, Any]) -> list[str]:
    """The story first: per host its stack before and after, then the headline and the
    findings by state, in words."""
    told = doc["story"]
    out = []
    for host in told["hosts"]:
        rows = [
            [
                text(m["what"]),
                code(m["before"] or "-"),
                code(m["after"] or "-"),
                "changed" if m["changed"] else "",
            ]
            for m in stack_rows(host)
        ]
        out += [f"**Stack on {code(host['host'])}**", ""]
        out += table(["", "Before", "After", ""], rows) if rows else []
        out.append("")
        if host["other_packages"]:
            out += [f"_And {_count(host['other_packages'], 'other package')} moved._", ""]
        for miss in host.get("unread", ()):  # what the table may miss: a read that failed
            out += [f"**Not read:** {_unread(miss)}", ""]
    for line in told["lines"][len(told["hosts"]) :]:
        out += [text(line), ""]
    return out


def _unread(miss: dict[str, Any]) -> str:
    """``packages snapshot after install-numpy failed: `why```: the host's words as code."""
    return f"{text(miss['what'] + ' ' + miss['where'])} failed: {code(miss['short'])}"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _failures(doc: dict[str, Any], short: Callable[[str], str]) -> list[str]:
    out = ["## Failed steps", ""]
    if not doc["failures"]:
        return out + ["_No step run failed._", ""]
    for run in doc["failures"]:
        exit_code = f", exit status {run['exit_code']}" if run["exit_code"] is not None else ""
        page = f" ([run page](<{_dest(run['url'])}>))" if run["url"] else ""
        out += [
            f"### {code(run['step'])} on {code(run['host'])}: {text(run['status'])}{exit_code}",
            "",
            f"At {text(when(run['time']))}, run {code(short(run['run']))}{page}: "
            + code(run["command"]),
            "",
        ]
        if run["stderr"]:
            before = (
                f" (after {_count(run['stderr_before'], 'earlier line')})"
                if run["stderr_before"]
                else ""
            )
            out += [f"The last lines of its stderr{before}:", "", *block("\n".join(run["stderr"]))]
        else:
            out.append("_It printed nothing on stderr._")
        out.append("")
    return out


#: A change's verdict as the Markdown table says it beside the percentage (no colour there).
VERDICT_SAID = {"better": " better", "worse": " worse", "noise": " within noise"}


def _side(change: dict[str, Any], side: str) -> str:
    """A change's median, and beside it the spread of repeated samples."""
    shown = code(figure(change[side], change["unit"]))
    spread = spread_text(change.get(f"{side}_samples", 1), change.get(f"{side}_spread"))
    return f"{shown} ({text(spread)})" if spread else shown


def _change_row(name: str, host: str | None, change: dict[str, Any], between: str) -> list[str]:
    return [
        text(name),
        code(host or "-"),
        _side(change, "before"),
        _side(change, "after"),
        f"**{percent_text(change['percent'])}**{VERDICT_SAID.get(change.get('verdict'), '')}",
        text(between),
    ]


def _impact(doc: dict[str, Any], chart_links: list[tuple[str, str]] | None) -> list[str]:
    out = ["## Impact", ""]
    effect = doc["impact"]
    if not effect["throughput"] and not effect["other"]:
        return out + _empty("impact")
    header = ["Figure", "Host", "Before", "After", "Change", "Between"]
    if effect["throughput"]:
        rows = []
        for series in effect["throughput"]:
            name = series_name(series)
            for change in series["changes"]:
                rows.append(_change_row(name, series["host"], change, change["between"]))
            if series["overall"] and len(series["changes"]) > 1:
                rows.append(
                    _change_row(name, series["host"], series["overall"], "overall: first → last")
                )
            if not series["changes"]:
                only = series["latest"]
                shown, said = "-", "no trusted figure, nothing to compare"
                if only is not None:
                    shown = code(figure(only["median"], series["unit"]))
                    spread = spread_text(only["samples"], only["spread"])
                    shown += f" ({text(spread)})" if spread else ""
                    said = (
                        "one trusted "
                        + ("run of samples" if only["samples"] > 1 else "figure")
                        + ", nothing to compare"
                    )
                rows.append([text(name), code(series["host"] or "-"), "-", shown, "-", text(said)])
        out += ["### Throughput", "", *table(header, rows), ""]
        if chart_links:
            out += [f"![{text(title)}](<{_dest(path)}>)" for title, path in chart_links] + [""]
    if effect["other"]:
        rows = []
        for series in effect["other"]:
            if series["overall"]:
                rows.append(
                    _change_row(
                        series_name(series), series["host"], series["overall"], "first → last"
                    )
                )
        if rows:
            out += ["### Other figures", "", *table(header, rows), ""]
    if len(chart_links or ()) < len(doc["charts"]):
        other = "other " if chart_links else ""
        out += [f"_The charts of the {other}figures are in the HTML export._", ""]
    return out


def _dest(path: str) -> str:
    """A link destination inside ``<…>``."""
    return re.sub(r"([<>\\])", r"\\\1", path)


def _timeline(doc: dict[str, Any], short: Callable[[str], str]) -> Iterator[str]:
    yield from ["## Timeline", ""]
    if not doc["timeline"]:
        yield from _empty("timeline")
        return
    header = ["Time (UTC)", "Elapsed", "What", "Host", "Outcome", "Took"]
    yield from table_lines(header, _timeline_rows(doc, short))
    yield ""


def _timeline_rows(doc: dict[str, Any], short: Callable[[str], str]) -> Iterator[list[str]]:
    for entry in doc["timeline"]:
        kind = entry["kind"]
        if kind in ("step", "benchmark"):
            about = f"{kind} {code(entry['step'])}"
        elif kind == "rollback":
            back = entry["rollback"]
            target = code(short(back["run"]))
            if back["url"]:
                target = f"[{target}]({back['url']})"
            side = "before" if back["phase"] == "before" else "after"
            about = f"rollback to {code(back['to'])} (the packages {side} run {target})"
        else:
            about = text(what(entry))
        yield [
            text(when(entry["time"])) + (" (import)" if entry.get("imported") else ""),
            text(elapsed(entry["elapsed"])),
            about,
            code(entry.get("host") or "-"),
            text(outcome(entry)),
            text(took(entry)),
        ]


def _changes(doc: dict[str, Any]) -> Iterator[str]:
    yield from ["## What changed", ""]
    if not doc["changes"]:
        yield from _empty("changes")
        return
    source = {"snapshots": "package snapshots", "output": "the installer's output"}
    for host, entries in doc["changes"].items():
        yield from [f"### {code(host)}", ""]
        for entry in told_changes(entries):
            if entry["kind"] == "quiet":
                steps = ", ".join(f"{code(s)} ×{n:,}" for s, n in entry["steps"].items())
                yield f"- {text(quiet_text(entry))}: {steps}"
                continue
            told = f", from {source[entry['source']]}" if entry["source"] else ""
            yield f"- {code(entry['step'])} at {text(when(entry['time']))}{told}:"
            if entry["source"] == "snapshots" and not entry["packages"]:
                yield "  - no package changed"
            for miss in entry.get("unread", ()):
                yield f"  - {_unread(miss)}: what it changed is not known"
            for p in entry["packages"]:
                yield f"  - {code(p['text'])}"
            for probe in entry["probes"]:
                yield (f"  - probe {code(probe['probe'])} read differently than at "
                       f"{text(when(probe['since']))}:")  # fmt: skip
                for row in probe["fields"]:
                    yield (
                        f"    - {code(row['field'])}: {code(row['before'] or '-')} → "
                        f"{code(row['after'] or '-')}"
                    )
                if probe["more"]:
                    yield f"    - and {probe['more']} more fields (in the JSON export)"
        yield ""


def _rollouts(doc: dict[str, Any], short: Callable[[str], str]) -> list[str]:
    """The gated rollouts (a section only where there was one): how far each went, where it
    stopped and why, the checks that failed there."""
    if not doc.get("rollouts"):
        return []
    out = ["## Rollouts", ""]
    for r in doc["rollouts"]:
        name = code(short(r["rollout"]))
        name = f"[{name}](<{_dest(r['url'])}>)" if r["url"] else name
        out.append(
            f"- Rollout {name} through gate {code(r['gate'])}, began "
            f"{text(when(r['started']))}: **{r['status']}**, {r['batches_passed']} of "
            f"{r['batches']} batches ({r['hosts_passed']} of {r['hosts']} hosts) passed"
            + (f"; stopped at batch {r['batch']}: {text(r['reason'])}" if r["failed"] else "")
            + (
                f"; left drained: {', '.join(code(h) for h in r['drained'])}"
                if r["drained"]
                else ""
            )
        )
        for c in r["failed"]:
            out.append(f"  - {code(c['host'] or '-')} {text(c['check'])}: {text(c['reason'])}")
    return out + [""]


def _pitfalls(doc: dict[str, Any], short: Callable[[str], str]) -> Iterator[str]:
    yield from ["## Pitfalls hit", ""]
    if not doc["pitfalls"]:
        yield from _empty("pitfalls")
        return
    for i, found in enumerate(along(short, doc["pitfalls"]), 1):
        yield from _pitfall(i, found, short)


def _pitfall(i: int, found: dict[str, Any], short: Callable[[str], str]) -> list[str]:
    out: list[str] = []
    where = []
    if found["step"]:
        where.append(f"step {code(found['step'])}")
    if found["host"]:
        where.append(f"on {code(found['host'])}")
    if found["time"]:
        where.append(f"at {text(when(found['time']))}")
    if found["run"]:
        where.append(f"(run {code(short(found['run']))})")
    out += [
        f"### {i}. {found['severity']} {code(found['id'])}: {text(found['title'])}",
        "",
        " ".join(where) + ("." if where else ""),
        "",
    ]
    if found["evidence"]:
        lines = [
            (f"{e['line']}: " if e["line"] is not None else "") + e["text"]
            for e in found["evidence"]
        ]
        if found["evidence_more"]:
            lines.append(f"… and {found['evidence_more']} more lines")
        out += ["Evidence:", "", *block("\n".join(lines)), ""]
    out += [f"Advice: {text(found['advice'])}", ""]
    resolution = found["resolution"]
    if found["regression_of"]:
        earlier = code(found["regression_of"])
        out += [f"Back again: it had been resolved before ({earlier}).", ""]
    fixes = [text(fact["text"]) for fact in resolution["later"]]
    if resolution["acknowledged"] is not None:
        fixes.append(f"acknowledged: {text(resolution['acknowledged'])}")
    if fixes:
        out += [f"State: **{found['state']}**. What fixed it:", ""]
        out += [*(f"- {fix}" for fix in fixes), ""]
    else:
        out += ["_Open: not acknowledged, and nothing later in the record shows it gone._", ""]
    return out


def _actions(doc: dict[str, Any], short: Callable[[str], str]) -> list[str]:
    out = ["## Action items", ""]
    if not doc["action_items"]:
        return out + _empty("action_items" if doc["pitfalls"] else "no_findings")
    for item in doc["action_items"]:
        if item["kind"] == "finding":
            runs = []
            for link in item["links"]:
                where = " on ".join(code(x) for x in (link["step"], link["host"]) if x)
                run = (
                    f"[run {code(short(link['run']))}](<{_dest(link['url'])}>)"
                    if link["url"]
                    else f"run {code(short(link['run']))}"
                )
                runs.append(f"{where} ({run})" if where else run)
            hosts = ", ".join(code(h) for h in item["hosts"])
            covers = "; ".join(runs) or (f"on {hosts}" if hosts else "")
            more = f"{item['count']} findings: " if item["count"] > 1 else ""
            told = f" ({more}{covers})" if covers else ""
            out.append(
                f"- [ ] **{item['severity']}** {code(item['id'])}: {text(item['advice'])}{told}"
            )
        else:
            out.append(f"- [ ] {text(item['text'])}")
    return out + [""]


def _supporting(doc: dict[str, Any], short: Callable[[str], str]) -> Iterator[str]:
    support = doc["supporting"]
    yield from ["## Supporting information", "", "### Commands", ""]
    commands = support["commands"]
    if commands:
        fence = getattr(commands, "fence", None)
        if fence is None:
            fence = max((fence_run(line) for c in commands for line in command_lines(c)), default=0)
        fence_text = "`" * max(3, fence + 1)
        yield f"{fence_text}shell"
        shown = along(short, commands)
        yield from _stripped(line for c in shown for line in command_lines(c, short))
        yield from [fence_text, ""]
    else:
        yield from ["_No command was run._", ""]
    yield from _versions(doc)


def command_lines(command: dict[str, Any], short: Callable[[str], str] = str) -> tuple[str, str]:
    """A command's lines in the supporting commands: when, what and how it ended (its run's
    id as ``short`` shows it), then it."""
    code_text = f", exit {command['exit_code']}" if command["exit_code"] is not None else ""
    play = command.get("ansible")
    told = f" [{play['playbook']}: {play['play']} › {play['task']}]" if play else ""
    return (
        f"# {when(command['time'])} {command['step']} on {command['host']}: "
        f"{command['status']}{code_text} (run {short(command['run'])}){told}",
        command["command"],
    )


def _versions(doc: dict[str, Any]) -> list[str]:
    support = doc["supporting"]
    out: list[str] = []
    out += ["### Versions", ""]
    if not support["versions"]:
        out += _empty("versions")
    for host, known in support["versions"].items():
        out += [f"#### {code(host)}", ""]
        if known["torch_env"]:
            out += [f"- torch-env at {text(when(known['torch_env']['time']))}: "
                    f"{code(known['torch_env']['summary'])}"]  # fmt: skip
        if known["packages"]:
            told = f" ({text('from the ' + known['source'])})" if known["source"] else ""
            out.append(f"- packages{told}:")
            out += [
                f"  - {code(name)} {code(version or 'removed')}"
                for name, version in known["packages"].items()
            ]
        out.append("")
    record = support["record"]
    out += [
        "### Record",
        "",
        f"Made by journal {text(record['journal_version'])} from {record['events']} events "
        f"(the last at {text(when(record['last_event']))}); `journal verify` checks their "
        "hash chain.",
    ]
    return out
