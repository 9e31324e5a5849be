"""A benchmark whose figure cannot be trusted: requests failed, or the results were wrong.

`bench_serving` (sglang) and `vllm bench serve` compute their throughput from the requests
that succeeded: when `Successful requests:` is below the `--num-prompts` asked for, or
`Failed requests:` is above 0, the throughput printed measures a different (smaller, or
failing) workload, and comparing it with an earlier figure says nothing. nccl-tests checks the
result of every collective: `# Out of bounds values : 3 FAILED` means the collective returned
wrong data, whatever bandwidth it printed — a broken NCCL, driver, topology or tuning variable
(`NCCL_PROTO`, `NCCL_ALGO`), not a slow one. The footer reads in every layout nccl-tests has
printed: with the `#`, without it (releases before 2.0: ` Out of bounds values : 2 FAILED`),
and under an mpirun's `[1,0]<stdout>:` prefix.
"""

from __future__ import annotations

from collections.abc import Iterator

from journal.pitfalls.base import Finding, finding
from journal.projections.metrics import headline_rank
from journal.reading.bench import (
    DISPLAY,
    Figure,
    recorded_figures,
    subject_blocks,
)
from journal.reading.subject import Subject

ID = "bench-invalid"
ORDER = 81

SERVING_ADVICE = (
    "do not compare this figure: find why requests failed in the server's log (out of memory, "
    "a timeout, a prompt longer than the context length, a crash after the upgrade), fix it, "
    "and run the benchmark again until every request asked for succeeds"
)
NCCL_ADVICE = (
    "treat the NCCL stack as broken until this passes: run nccl-tests again with `-c 1` and "
    "NCCL_DEBUG=WARN, unset NCCL_PROTO / NCCL_ALGO overrides, check the GPUs and links "
    "(`nvidia-smi -q -d ECC`, `dmesg | grep -i xid`, `nvidia-smi topo -m`) and that the NCCL "
    "nccl-tests loads is the one you mean to measure"
)


def detect(subject: Subject) -> Iterator[Finding]:
    read = subject_blocks(subject)
    judged: set[str] = set()
    for run in subject.runs:
        for block in read[run.key]:
            problems = block.problems()
            if not problems:
                continue
            judged.add(run.key)
            tool = {
                "bench_serving": "the serving benchmark's",
                "vllm-throughput": "the throughput benchmark's",
                "nccl-tests": "nccl-tests'",
            }[block.tool]
            reasons = "; ".join(reason for reason, _ in problems)
            evidence = [run.command_evidence()]
            for _, lines in problems:
                evidence.extend(lines)
            ranked = sorted(
                block.figures,
                key=lambda f: headline_rank(f.name),
            )
            shown = ranked[0] if ranked else None
            title = f"{tool} figures cannot be trusted: {reasons}"
            if shown is not None:
                unit = f" {shown.unit}" if shown.unit else ""
                title += (
                    f" (it printed {DISPLAY.get(shown.name, shown.name)} {shown.value:,.2f}{unit})"
                )
                if shown.evidence is not None:
                    evidence.append(shown.evidence)
            yield finding(
                ID,
                "error",
                title,
                NCCL_ADVICE if block.tool == "nccl-tests" else SERVING_ADVICE,
                evidence,
                run,
            )
    yield from _recorded(subject, judged)


def _recorded(subject: Subject, judged: set[str]) -> Iterator[Finding]:
    """Figures recorded as untrusted by their benchmark's parser (a non-zero ``#wrong`` in an
    nccl-tests table, failed requests) whose output the summaries above did not judge."""
    runs = {run.key: run for run in subject.runs}
    untrusted: dict[str | None, list[Figure]] = {}
    for f in recorded_figures(subject):
        if f.invalid and f.run not in judged:
            untrusted.setdefault(f.run, []).append(f)
    for run_key, found in untrusted.items():
        run = runs.get(run_key) if run_key else None
        shown = sorted(found, key=lambda f: headline_rank(f.name))[0]
        unit = f" {shown.unit}" if shown.unit else ""
        title = (
            f"benchmark figures cannot be trusted: {shown.invalid} (it printed "
            f"{DISPLAY.get(shown.name, shown.name)} {shown.value:,.2f}{unit})"
        )
        evidence = [run.command_evidence()] if run is not None else []
        evidence += [f.evidence for f in found[:3] if f.evidence is not None]
        advice = NCCL_ADVICE if "wrong" in (shown.invalid or "") else SERVING_ADVICE
        yield finding(ID, "error", title, advice, evidence, run)
