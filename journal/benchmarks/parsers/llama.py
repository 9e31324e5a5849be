"""llama-bench's Markdown table (its default output, ``-o md``).

``| model | size | params | backend | ngl | test | t/s |`` then a ``| --- |`` line and one row
per test: ``| llama 7B Q4_0 | 3.56 GiB | 6.74 B | CUDA | 99 | pp512 | 5765.41 ± 20.55 |``.
Each row gives ``tokens_per_s`` (tok/s), the mean over the repetitions, labelled with ``test``,
``model`` and every other column whose value differs between the table's rows (``n_batch``,
``threads``, ``ngl`` when several were asked for). The standard deviation after ``±`` is
dropped: as a figure in tok/s it would read as a throughput whose fall is a regression.
"""

from __future__ import annotations

import re

from journal.benchmarks.parsers._text import NUMBER, Group, Text, number

VALUE = re.compile(r"^" + NUMBER + r"(?:\s*±\s*" + NUMBER + r")?$")
SEPARATOR = re.compile(r"^:?-+:?$")
ALWAYS = ("test", "model")


def _cells(line: str) -> list[str] | None:
    line = line.strip()
    if not (line.startswith("|") and line.endswith("|")) or len(line) < 2:
        return None
    return [c.strip() for c in line[1:-1].split("|")]


def _label(header: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", header).strip("_")
    return name or "column"


def llama_bench(doc: Text) -> list[Group]:
    """One group per table."""
    groups = []
    for header in doc.spans_with("t/s |"):
        names = _cells(doc.line(*header))
        if not names or "t/s" not in names:
            continue
        rate = names.index("t/s")
        rows: list[tuple[int, list[str]]] = []
        span = doc.next_span(header[1])
        while span is not None:
            cells = _cells(doc.line(*span))
            if cells is None:
                break
            if len(cells) == len(names) and not all(SEPARATOR.match(c) for c in cells):
                rows.append((span[0], cells))
            span = doc.next_span(span[1])
        shown = [
            i
            for i, name in enumerate(names)
            if i != rate and (name in ALWAYS or len({cells[i] for _, cells in rows}) > 1)
        ]
        group = Group(header[0])
        for start, cells in rows:
            match = VALUE.match(cells[rate])
            value = number(match.group(1)) if match else None
            if value is None:
                continue
            labels = {_label(names[i]): cells[i] for i in shown}
            group.add("tokens_per_s", value, "tok/s", start, labels)
        groups.append(group)
    return groups
