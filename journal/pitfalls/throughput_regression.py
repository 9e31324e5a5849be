"""A throughput figure fell more than 5% against the earlier figure of the same benchmark.

Throughput is why the stack is upgraded: in the seed upgrade, EAGLE-3 speculative decoding
gave 90 tok/s on the old stack, 54.1 tok/s after the first attempt (-39.9%), and 96.1 tok/s
(+77.6%) once the kernels matched the new torch. A figure is compared with the previous figure
of the same metric on the same host: read from benchmark output (sglang `bench_serving`,
`vllm bench serve`, `vllm bench throughput`, nccl-tests `# Avg bus bandwidth`) for the same
command (output files, the server's address and log options aside), or recorded as a metric
with the same name and labels. A fall of more than 5% is a warning, of more than 20% an error.
Figures of a benchmark that failed requests or returned wrong values (`bench-invalid`) are
neither judged nor used as a baseline.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from journal.pitfalls._bench import (
    DISPLAY,
    Block,
    Figure,
    figure_key,
    figures,
    run_name,
)
from journal.pitfalls.base import Evidence, Finding, Subject, finding
from journal.projections.metrics import headline_rank

ID = "throughput-regression"
ORDER = 80
#: Resolved by a later figure of the same series back within THRESHOLD of the reference.
RESOLVED_BY = ("figure",)

#: A fall larger than this fraction fires.
THRESHOLD = 0.05
#: A fall larger than this is an error.
SEVERE = 0.20


def _value(v: float) -> str:
    return f"{v:,.2f}" if abs(v) < 1e6 else f"{v:,.0f}"


def _evidence(f: Figure, where: str) -> Evidence:
    if f.evidence is not None:
        return f.evidence
    labels = ", ".join(f"{k}={v}" for k, v in sorted(f.labels.items()))
    return Evidence(
        f"{where}: {f.name} = {_value(f.value)}{' ' + f.unit if f.unit else ''}"
        + (f" ({labels})" if labels else ""),
        None,
        f.event,
        f.run,
    )


def detect(subject: Subject) -> Iterator[Finding]:
    runs = {run.key: run for run in subject.runs}
    latest: dict[tuple, Figure] = {}
    falls: dict[tuple, list[tuple[Figure, Figure, float]]] = {}
    for f, block in figures(subject):
        if not f.higher_is_better or f.value != f.value:  # NaN
            continue
        if f.invalid or (block is not None and _untrusted(block)):
            continue
        key = figure_key(f)
        before = latest.get(key)
        latest[key] = f
        if before is None or before.value <= 0:
            continue
        change = (f.value - before.value) / before.value
        if change < -THRESHOLD:
            group = (f.run, f.host, f.labels.get("summary"), f.event if f.run is None else None)
            falls.setdefault(group, []).append((before, f, change))
    for (run_key, host, _, _), pairs in falls.items():
        pairs.sort(key=lambda p: headline_rank(p[1].name))
        before, after, change = pairs[0]
        run = runs.get(run_key) if run_key else None
        was = runs.get(before.run) if before.run else None
        name = DISPLAY.get(after.name, after.name)
        unit = f" {after.unit}" if after.unit else ""
        journal = subject.journal and run is not None and not run.imported
        where = (
            f" ({was.step} → {run.step})"
            if journal and was and run and was.step != run.step
            else ""
        )
        more = (
            f", and {len(pairs) - 1} more figure{'s' if len(pairs) > 2 else ''}"
            if len(pairs) > 1
            else ""
        )
        title = (
            f"{name} fell {-change:.1%}: {_value(before.value)} → {_value(after.value)}"
            f"{unit}{where}{more}"
        )
        evidence: list[Evidence] = []
        for b, a, _ in pairs[:4]:
            evidence.append(_evidence(b, "before"))
            evidence.append(_evidence(a, "after"))
        if was and run:
            between = f"between {run_name(subject, was)} and {run_name(subject, run)}"
        else:
            between = "between the two measurements"
        look = " (`journal log` shows each step's package changes and probes)" if journal else ""
        advice = (
            f"run the benchmark again to rule out noise; if the fall holds, look at what changed "
            f"{between} on {host or 'this host'}{look}: a torch, kernel (sgl-kernel, "
            "flashinfer) or NCCL version that no longer matches, a speculative-decoding or "
            "attention backend that fell back, a changed server flag, or other load on the GPUs "
            "(`nvidia-smi`); fix it, or roll back the change"
        )
        found = finding(
            ID,
            "error" if -change > SEVERE else "warning",
            title,
            advice,
            evidence,
            run,
            series=figure_key(after),
            reference=before.value,
            fallen=after.value,
            threshold=THRESHOLD,
        )
        found = replace(found, seq=after.event if after.event is not None else found.seq)
        if run is None and host:
            found = replace(found, host=host)
        yield found


def _untrusted(block: Block) -> bool:
    return bool(block.problems())
