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
never fires. The figures of a series form sets: the repeated samples one benchmark run printed
in one phase (as the demo's CPU benchmark prints five), or one figure; separate runs are
separate sets, however close. Each set is compared with the set before it by the one verdict
every surface shows (`journal.projections.verdict.judge`: median against median), and the
finding fires exactly where that verdict is `worse`: the change is more than 5% of the earlier
median and, with repeated samples, the two sets' min–max ranges do not overlap. A benchmark
labelled `control` (it measures the machine, not the stack: a pure-Python loop) never fires:
its changes are the machine's. A fall of more than 20% is an error, else a warning. Figures of
a benchmark that failed requests or returned wrong values (`bench-invalid`) are neither judged
nor used as a baseline.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from journal.pitfalls.base import Finding, finding
from journal.projections.metrics import headline_rank
from journal.projections.verdict import (
    NOISE_PERCENT,
    Verdict,
    is_control,
    judge_sets,
    sets,
)
from journal.reading.bench import (
    DISPLAY,
    Block,
    Figure,
    figure_key,
    figures,
    run_name,
)
from journal.reading.subject import Evidence, Subject

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
    series: dict[tuple, list[Figure]] = {}
    for f in trusted:
        series.setdefault(figure_key(f), []).append(f)
    worse: dict[tuple, list[tuple[Figure, Figure, float, Figure, Verdict]]] = {}
    for figures_ in series.values():
        groups = sets(figures_)
        for earlier, later in zip(groups, groups[1:], strict=False):
            # the one verdict every surface shows: a regression exactly where it says worse
            last = later[-1]
            judged = judge_sets(earlier, later, last.direction, is_control(last.labels))
            if judged.verdict != "worse" or judged.before <= 0:
                continue
            change = judged.delta / judged.before
            group = (last.run, last.host, last.labels.get("summary"))
            group += (last.event if last.run is None else None,)
            worse.setdefault(group, []).append(
                (_middle(earlier), _middle(later), change, last, judged)
            )
    place = {id(f): index for index, f in enumerate(trusted)}
    ordered = sorted(worse.items(), key=lambda item: min(place[id(p[3])] for p in item[1]))
    for (run_key, host, _, _), pairs in ordered:
        # The headline figure first; past those, figures better higher (accept_length) before
        # latencies, and the larger change first.
        pairs.sort(key=lambda p: (headline_rank(p[1].name), p[1].direction != "higher", -abs(p[2])))
        before, after, change, last, judged = pairs[0]
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
        medians = (
            f" (medians of {judged.before_count} and {judged.after_count} samples)"
            if judged.repeated
            else ""
        )
        title = (
            f"{name} {verb} {abs(change):.1%}: {_value(judged.before)} → {_value(judged.after)}"
            f"{unit}{medians}{where}{more}"
        )
        evidence: list[Evidence] = []
        for b, a, _, _, _ in pairs[:4]:
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
            reference=judged.before,
            fallen=judged.after,
            threshold=THRESHOLD,
        )
        found = replace(found, seq=last.event if last.event is not None else found.seq)
        if run is None and host:
            found = replace(found, host=host)
        yield found


def _untrusted(block: Block) -> bool:
    return bool(block.problems())


def _middle(group: list[Figure]) -> Figure:
    """The sample whose line the evidence shows for a set: the median one (the lower of the
    middle two), the figure itself when single. The title says the sets' true medians."""
    return sorted(group, key=lambda f: f.value)[(len(group) - 1) // 2]
