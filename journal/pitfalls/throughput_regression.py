"""A figure got worse by more than 5% against the earlier figure of the same benchmark.

Throughput is why the stack is upgraded: in the seed upgrade, EAGLE-3 speculative decoding
gave 90 tok/s on the old stack, 54.1 tok/s after the first attempt (-39.9%), and 96.1 tok/s
(+77.6%) once the kernels matched the new torch. A figure is compared with the previous figure
of the same metric on the same host: read from benchmark output (sglang `bench_serving`,
`vllm bench serve`, `vllm bench throughput`, nccl-tests `# Avg bus bandwidth`) for the same
command (output files, the server's address and log options aside), or recorded as a metric
with the same name and labels. Which way is worse is the metric's direction
(`journal.projections.metrics.direction`, as on the throughput page): a fall of a figure
better higher (throughputs, bandwidths, the speculative-decoding `accept_length`), a rise of
one better lower (TTFT, ITL, TPOT, E2E latency); a count (`successful_requests`) is neither and
never fires. A change of more than 5% is a warning, of more than 20% an error. Repeated
samples (the figures of one series that one benchmark run printed, as the demo's CPU
benchmark does) are compared as a whole, median against median, and a change within their
spread is noise (`is_noise`, the throughput page's own test). Figures of a benchmark that
failed requests or returned wrong values (`bench-invalid`) are neither judged nor used as a
baseline.
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
from journal.projections.metrics import NOISE_PERCENT, headline_rank, is_noise

ID = "throughput-regression"
ORDER = 80
#: Resolved by a later figure of the same series back within THRESHOLD of the reference.
RESOLVED_BY = ("figure",)

#: A change for the worse larger than this fraction fires: the noise of a single figure.
THRESHOLD = NOISE_PERCENT / 100
#: A change for the worse larger than this is an error.
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
    trusted: list[Figure] = []
    for f, block in figures(subject):
        if f.direction == "count" or f.value != f.value:  # a count, NaN
            continue
        if f.invalid or (block is not None and _untrusted(block)):
            continue
        trusted.append(f)
    series: dict[tuple, list[list[Figure]]] = {}
    for f in trusted:
        groups = series.setdefault(figure_key(f), [])
        if groups and _repeated(groups[-1][-1], f):
            groups[-1].append(f)
        else:
            groups.append([f])
    worse: dict[tuple, list[tuple[Figure, Figure, float, Figure]]] = {}
    for groups in series.values():
        for earlier, later in zip(groups, groups[1:], strict=False):
            before, after = _median(earlier), _median(later)
            if before.value <= 0:
                continue
            change = (after.value - before.value) / before.value
            bad = change if after.direction == "lower" else -change
            if bad > THRESHOLD and not is_noise(earlier, later):
                last = later[-1]
                group = (last.run, last.host, last.labels.get("summary"))
                group += (last.event if last.run is None else None,)
                worse.setdefault(group, []).append((before, after, change, last))
    place = {id(f): index for index, f in enumerate(trusted)}
    ordered = sorted(worse.items(), key=lambda item: min(place[id(p[3])] for p in item[1]))
    for (run_key, host, _, _), pairs in ordered:
        # The headline figure first; past those, figures better higher (accept_length) before
        # latencies, and the larger change first.
        pairs.sort(key=lambda p: (headline_rank(p[1].name), p[1].direction != "higher", -abs(p[2])))
        before, after, change, last = pairs[0]
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
        verb = "rose" if after.direction == "lower" else "fell"
        title = (
            f"{name} {verb} {abs(change):.1%}: {_value(before.value)} → {_value(after.value)}"
            f"{unit}{where}{more}"
        )
        evidence: list[Evidence] = []
        for b, a, _, _ in pairs[:4]:
            evidence.append(_evidence(b, "before"))
            evidence.append(_evidence(a, "after"))
        if was and run:
            between = f"between {run_name(subject, was)} and {run_name(subject, run)}"
        else:
            between = "between the two measurements"
        look = " (`journal log` shows each step's package changes and probes)" if journal else ""
        advice = (
            f"run the benchmark again (repeated samples show its spread) to rule out noise; if "
            f"the {'rise' if verb == 'rose' else 'fall'} holds, look at what changed "
            f"{between} on {host or 'this host'}{look}: a torch, kernel (sgl-kernel, "
            "flashinfer) or NCCL version that no longer matches, a speculative-decoding or "
            "attention backend that fell back, a changed server flag, or other load on the GPUs "
            "(`nvidia-smi`); fix it, or roll back the change"
        )
        found = finding(
            ID,
            "error" if abs(change) > SEVERE else "warning",
            title,
            advice,
            evidence,
            run,
            series=figure_key(after),
            reference=before.value,
            fallen=after.value,
            threshold=THRESHOLD,
        )
        found = replace(found, seq=last.event if last.event is not None else found.seq)
        if run is None and host:
            found = replace(found, host=host)
        yield found


def _untrusted(block: Block) -> bool:
    return bool(block.problems())


def _median(group: list[Figure]) -> Figure:
    """The figure that stands for repeated samples: the median one (the lower of the middle
    two), the figure itself when single."""
    return sorted(group, key=lambda f: f.value)[(len(group) - 1) // 2]


def _repeated(a: Figure, b: Figure) -> bool:
    """Whether a later figure of a series is a repeated sample of an earlier one: both printed
    by one benchmark run (the same run, so the same phase and no step run between them, as
    :func:`journal.projections.metrics.repeat_groups` groups the throughput page's samples).
    Separate runs of a benchmark are compared one by one, however close: a fall between two
    of them still warns, its advice to run the benchmark again."""
    return a.run is not None and a.run == b.run and a.labels.get("phase") == b.labels.get("phase")
