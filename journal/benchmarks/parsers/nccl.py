"""nccl-tests output (``all_reduce_perf`` and the other ``*_perf`` binaries).

A run prints a header naming its columns (``size count type redop root`` then ``time algbw
busbw #wrong`` out-of-place and the same in-place; newer versions add per-iteration columns,
older ones have no ``root`` and an ``error`` column), one row per size, and a footer:
``# Out of bounds values : 0 OK`` and ``# Avg bus bandwidth    : 232.167``. The columns are
found from the header, so every layout reads the same. The oldest releases (before 2.0) print
the header, the table and the footer without the ``#`` (`` Out of bounds values : 2 FAILED``,
`` Avg bus bandwidth    : 128.942``), and an ``mpirun`` puts ``[1,0]<stdout>:`` in front of
every line: both read as the ``#`` layout does.
"""

from __future__ import annotations

import re

from journal.benchmarks.parsers._text import NUMBER, Group, Problem, Text, number

#: `[1,0]<stdout>:` in front of each line of an mpirun.
MPI_PREFIX = re.compile(r"^\[[\d,]+\]<std(?:out|err)>:")
#: The footer lines anywhere in an output, `#` optional (the oldest releases printed none),
#: under an mpirun's prefix or not: what the pitfall detectors read a transcript's runs with.
_FOOTER = r"^(?:\[[\d,]+\]<std(?:out|err)>:)?[ \t]*#?[ \t]*"
NCCL_BUSBW = re.compile(_FOOTER + r"Avg bus bandwidth[ \t]*:[ \t]*" + NUMBER, re.M)
NCCL_OOB = re.compile(_FOOTER + r"Out of bounds values[ \t]*:[ \t]*(\d+)[ \t]+(OK|FAILED)", re.M)
#: The footer lines of a line without its mpirun prefix, `#` optional.
OOB = re.compile(r"^[ \t]*#?[ \t]*Out of bounds values[ \t]*:[ \t]*(\d+)[ \t]+(OK|FAILED)")
AVG = re.compile(r"^[ \t]*#?[ \t]*Avg bus bandwidth[ \t]*:[ \t]*" + NUMBER + r"[ \t]*(FAILED|OK)?")
TEST_NAME = re.compile(r"\b([a-z][a-z0-9_]*_perf)(?:_mpi)?\b")
PLACEMENTS = ("out-of-place", "in-place")
#: Lines in a table that are neither rows nor its end before the table is taken as cut off.
MAX_OTHER_LINES = 5_000


def nccl_triple(value: object) -> tuple[int, int, int] | None:
    """NCCL's version as (major, minor, patch): (2, 28, 9) of the tuple torch prints
    (``(2, 28, 9)``), and of the integer code older torch prints and nccl-tests' header shows
    (``nccl-library=22809``; 2708: 2.7.8, 22703: 2.27.3). Both the printed-facts reader and the
    drift readings read it here, below either."""
    if isinstance(value, tuple) and len(value) >= 3:
        return (int(value[0]), int(value[1]), int(value[2]))
    if isinstance(value, int):
        if value >= 10000:
            return (value // 10000, value % 10000 // 100, value % 100)
        return (value // 1000, value % 1000 // 100, value % 100)
    return None


def _bare(line: str) -> str:
    return MPI_PREFIX.sub("", line, count=1)


def _is_header(line: str) -> bool:
    """A table's column line: ``#       size   count   type …  busbw …`` (the oldest
    releases without the ``#``), not a sentence that names the words."""
    words = line.lstrip(" \t#").split()
    return bool(words) and words[0] == "size" and "busbw" in words


class _Run:
    """One run of a test binary: its table header (if seen), footer lines, and figures."""

    def __init__(self, start: int) -> None:
        self.group = Group(start)
        self.header: tuple[int, int] | None = None
        self.oob: int | None = None
        self.avg: int | None = None


def _runs(doc: Text) -> list[_Run]:
    """The runs in order: a header starts one, and so does a footer line that its run
    already has (output whose tables were cut away)."""
    marks = []
    for span in doc.spans_with("busbw", "Out of bounds values", "Avg bus bandwidth"):
        line = _bare(doc.line(*span))
        if "busbw" in line and "size" in line and _is_header(line):
            marks.append(("header", span))
        elif OOB.match(line):
            marks.append(("oob", span))
        elif AVG.match(line):
            marks.append(("avg", span))
    runs: list[_Run] = []
    for kind, span in marks:
        run = runs[-1] if runs else None
        if run is None or kind == "header" or getattr(run, kind) is not None:
            run = _Run(span[0])
            runs.append(run)
        if kind == "header":
            run.header = span
        else:
            setattr(run, kind, span[0])
    return runs


def _op(doc: Text, start: int, since: int, command: str) -> str | None:
    """The test's name: the last ``*_perf`` the output shows before the run (``# Collective
    test starting: all_reduce_perf``, the prompt line), else the one the command names."""
    pos = doc.text.rfind("_perf", since, start)
    for _ in range(20):
        if pos == -1:
            break
        begin, end = doc.span(pos)
        line = doc.line(begin, end)
        match = TEST_NAME.search(line)
        if match and "concluded" not in line:  # `# Collective test concluded:` ends the last run
            return match.group(1)
        pos = doc.text.rfind("_perf", since, begin)
    names = {m.group(1) for m in TEST_NAME.finditer(command)}
    return names.pop() if len(names) == 1 else None


def _table(doc: Text, run: _Run, op: str | None) -> tuple[list[Problem], bool]:
    """The rows under the run's header: busbw and algbw per size and placement. Returns the
    problems (wrong values) and whether any row was read."""
    assert run.header is not None
    columns = _bare(doc.line(*run.header)).lstrip(" \t#").split()
    at = {name: [i for i, c in enumerate(columns) if c == name] for name in ("algbw", "busbw")}
    wrong = [i for i, c in enumerate(columns) if c == "#wrong"]
    if "size" not in columns or not at["busbw"]:
        return [], False
    size_at = columns.index("size")
    kinds = [(c, columns.index(c)) for c in ("type", "redop") if c in columns]
    need = max([size_at, *at["algbw"], *at["busbw"], *wrong]) + 1
    rows: list[tuple[int, list[str]]] = []
    span: tuple[int, int] | None = run.header
    other = 0
    while span is not None and other < MAX_OTHER_LINES:
        span = doc.next_span(span[1])
        if span is None:
            break
        cells = _bare(doc.line(*span)).split()
        if cells and not cells[0].isdigit():
            line = " ".join(cells)
            if "Out of bounds" in line or "Avg bus bandwidth" in line or _is_header(line):
                break  # the footer, or the next run's table
        if len(cells) >= need and cells[size_at].isdigit() and cells[0].isdigit():
            rows.append((span[0], cells))
            other = 0
        else:
            other += 1
    varying = [(c, i) for c, i in kinds if len({cells[i] for _, cells in rows}) > 1]
    problems = []
    for start, cells in rows:
        for placement, algbw, busbw in zip(PLACEMENTS, at["algbw"], at["busbw"], strict=False):
            labels = {"size": cells[size_at], "placement": placement}
            labels.update({c: cells[i] for c, i in varying})
            if op:
                labels["op"] = op
            for name, index in (("busbw", busbw), ("algbw", algbw)):
                value = number(cells[index])
                if value is not None:
                    run.group.add(name, value, "GB/s", start, dict(labels))
        bad = [
            (placement, int(count))
            for placement, i in zip(PLACEMENTS, wrong, strict=False)
            if (count := number(cells[i])) is not None and count > 0
        ]
        if bad:
            total = sum(n for _, n in bad)
            where = " and ".join(f"{n} {placement}" for placement, n in bad)
            problems.append(
                doc.problem(
                    f"nccl-tests found {total} wrong value{'s' if total != 1 else ''} at size "
                    f"{cells[size_at]} B ({where}): the collective returned wrong results",
                    start,
                )
            )
    return problems, bool(rows)


def nccl_tests(doc: Text, command: str) -> tuple[list[Group], list[Problem]]:
    """Every run's figures (one group per run) and problems."""
    runs = _runs(doc)
    starts = [r.group.start for r in runs]
    problems: list[Problem] = []
    for index, run in enumerate(runs):
        since = starts[index - 1] if index else 0
        op = _op(doc, run.group.start, since, command)
        labels = {"op": op} if op else {}
        if run.header is not None:
            found, rows = _table(doc, run, op)
            problems += found
            if rows and run.oob is None:
                problems.append(
                    doc.problem(
                        "nccl-tests did not finish: no `# Out of bounds values` line follows "
                        "its table",
                        run.header[0],
                    )
                )
        if run.oob is not None:
            match = OOB.match(_bare(doc.line(*doc.span(run.oob))))
            assert match is not None
            count = int(match.group(1))
            if count > 0 or match.group(2) == "FAILED":
                line = doc.line(*doc.span(run.oob)).strip()
                problems.append(
                    doc.problem(
                        f"nccl-tests found {count} wrong value{'s' if count != 1 else ''} "
                        f"(`{line}`)",
                        run.oob,
                    )
                )
        if run.avg is not None:
            match = AVG.match(_bare(doc.line(*doc.span(run.avg))))
            assert match is not None
            value = number(match.group(1))
            if value is not None:
                run.group.add("avg_bus_bandwidth", value, "GB/s", run.avg, labels)
            if match.group(2) == "FAILED":
                problems.append(
                    doc.problem(
                        "the average bus bandwidth is below the NCCL_TESTS_MIN_BW the run was "
                        "given",
                        run.avg,
                    )
                )
    return [r.group for r in runs], problems
