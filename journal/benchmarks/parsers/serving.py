"""sglang and vLLM output: serving summaries, sglang ``bench_one_batch`` and
``bench_offline_throughput``, ``vllm bench throughput`` and ``vllm bench latency``.

The serving summary (sglang ``bench_serving``, ``vllm bench serve``) and sglang's offline one
print ``"{:<40} {:<10}".format(label, value)`` lines between a ``= Serving Benchmark Result =``
(or ``= Offline Throughput Benchmark Result =``) header and a line of ``=``; every line with a
number becomes a figure named after its label (see the package docstring for the names).
"""

from __future__ import annotations

import re

from journal.benchmarks.parsers._text import NUMBER, Group, Problem, Text, number, snake

_NUMBER = NUMBER

#: The throughput lines of the bench_serving / vllm bench serve summary: label -> (name, unit).
SERVING_METRICS = {
    "Request throughput (req/s)": ("request_throughput", "req/s"),
    "Input token throughput (tok/s)": ("input_token_throughput", "tok/s"),
    "Output token throughput (tok/s)": ("output_token_throughput", "tok/s"),
    "Total token throughput (tok/s)": ("total_token_throughput", "tok/s"),
    "Total Token throughput (tok/s)": ("total_token_throughput", "tok/s"),
    "Total throughput (tok/s)": ("total_token_throughput", "tok/s"),
}
SERVING_LINE = re.compile(
    r"^[ \t#]*("
    + "|".join(re.escape(k) for k in SERVING_METRICS)
    + r"):[ \t]+"
    + _NUMBER
    + r"[ \t]*$",
    re.M,
)
SUCCESSFUL = re.compile(r"^[ \t#]*Successful requests:[ \t]+(\d+)[ \t]*$", re.M)
FAILED = re.compile(r"^[ \t#]*Failed requests:[ \t]+(\d+)[ \t]*$", re.M)
ALL_FAILED = re.compile(r"All requests failed\. This is likely due to a misconfiguration")
VLLM_THROUGHPUT = re.compile(
    r"^[ \t]*Throughput: " + _NUMBER + r" requests/s, " + _NUMBER + r" (?:total )?tokens/s"
    r"(?:, " + _NUMBER + r" output tokens/s)?",
    re.M,
)
NUM_PROMPTS = re.compile(r"--num[-_]prompts?(?:=|\s+)(\d+)\b")

#: The summaries' headers, centred in `=` (a needle ending in `=`, rare in logs, is found fast).
HEADERS = (" Serving Benchmark Result =", " Offline Throughput Benchmark Result =")
#: `Label:   12.34`, `Label (unit):   12.34` (a `#` in front where a log was commented).
LABELLED = re.compile(r"^[ \t#]*([A-Za-z][^:]*?):[ \t]+" + NUMBER + r"[ \t]*$")
POSITION = re.compile(r"^[ \t#]*Position (\d+):[ \t]+" + NUMBER + r"[ \t]*$")
UNIT = re.compile(r"^(.*?)\s*\(([^()]*)\)$")
#: Lines of the summary that repeat the benchmark's settings, not what it measured.
SETTINGS = {
    "backend",
    "traffic_request_rate",
    "max_request_concurrency",
    "maximum_request_concurrency",
    "request_rate_configured",
    "burstiness_factor",
}
RENAMED = {"total_throughput": "total_token_throughput"}
UNITS = {"ms": "ms", "s": "s", "%": "%", "rps": "req/s"}

ONE_BATCH = re.compile(
    r"^[ \t]*(Prefill|Decode|Total)\.[ \t]+(median )?latency:[ \t]*"
    + NUMBER
    + r" s, (?:median )?throughput:[ \t]*"
    + NUMBER
    + r" token/s"
)
BATCH_SIZE = re.compile(r"^[ \t]*Decode \d+\. Batch size: (\d+),")
VLLM_LATENCY = re.compile(r"^[ \t]*(Avg|Std|(\d+)% percentile) latency: " + NUMBER + " seconds")


def label_name(label: str) -> tuple[str, str | None]:
    """A summary line's label as (metric name, unit): ``Mean TTFT (ms)`` -> ``mean_ttft_ms``,
    ``ms``; ``Output token throughput (tok/s)`` -> ``output_token_throughput``, ``tok/s``."""
    unit: str | None = None
    base = label
    match = UNIT.match(label)
    if match:
        inner = match.group(2).strip()
        if inner.lower() in UNITS or "/s" in inner:
            base, unit = match.group(1), UNITS.get(inner.lower(), inner)
    name = snake(base)
    name = RENAMED.get(name, "_".join("e2e_latency" if p == "e2el" else p for p in name.split("_")))
    if unit in ("ms", "s") and not name.endswith(f"_{unit}"):
        name = f"{name}_{unit}"
    return name, unit


def asked(command: str) -> int | None:
    """How many requests the command asked for (``--num-prompts N``), where it says once."""
    found = NUM_PROMPTS.findall(command)
    return int(found[-1]) if len(set(found)) == 1 else None


def _summary(doc: Text, header: tuple[int, int]) -> list[tuple[int, int]]:
    """The lines of the summary under ``header``, up to its closing line of ``=``."""
    lines = []
    span: tuple[int, int] | None = header
    while span is not None and len(lines) < 400:
        span = doc.next_span(span[1])
        if span is None:
            break
        line = doc.line(*span)
        bare = line.strip(" \t#")
        if len(bare) >= 10 and set(bare) == {"="}:
            break
        if any(h in line for h in HEADERS):
            break
        lines.append(span)
    return lines


def _read_summary(
    doc: Text, group: Group, spans: list[tuple[int, int]], want: int | None
) -> list[Problem]:
    """Every figure of a summary into ``group``; the problems its request counts show."""
    successful: tuple[int, int] | None = None
    failed: tuple[int, int] | None = None
    for start, end in spans:
        line = doc.line(start, end)
        position = POSITION.match(line)
        if position:
            value = number(position.group(2))
            if value is not None:
                group.add("position_acceptance_rate", value, "%", start, {"position": position[1]})
            continue
        match = LABELLED.match(line)
        if not match:
            continue
        name, unit = label_name(match.group(1))
        value = number(match.group(2))
        if value is None or name in SETTINGS:
            continue
        group.add(name, value, unit, start, {})
        if name == "successful_requests":
            successful = (int(value), start)
        elif name == "failed_requests":
            failed = (int(value), start)
    found: list[Problem] = []
    if failed and failed[0] > 0:
        count = failed[0]
        reason = f"{count} request{'s' if count != 1 else ''} of the benchmark failed"
        found.append(doc.problem(reason, failed[1]))
    if successful is not None and want is not None:
        if successful[0] < want and not (failed and failed[0] > 0):
            found.append(
                doc.problem(
                    f"only {successful[0]} of the {want} requests asked (--num-prompts {want}) "
                    "succeeded",
                    successful[1],
                )
            )
    elif successful is not None and successful[0] == 0 and not (failed and failed[0] > 0):
        found.append(doc.problem("no request of the benchmark succeeded", successful[1]))
    return found


def serving(doc: Text, command: str) -> tuple[list[Group], list[Problem]]:
    """The serving and offline summaries: one group each."""
    groups: list[Group] = []
    problems: list[Problem] = []
    want = asked(command)
    headers = doc.spans_with(*HEADERS)
    for header in headers:
        group = Group(header[0])
        problems += _read_summary(doc, group, _summary(doc, header), want)
        groups.append(group)
    if not headers:  # the summary's lines without its header (a grep, a cut log)
        spans = doc.spans_with("throughput (", "Successful requests:", "Failed requests:")
        spans = [s for s in spans if _known(doc.line(*s))]
        if spans:
            group = Group(spans[0][0])
            problems += _read_summary(doc, group, spans, want)
            groups.append(group)
    for start, _ in doc.spans_with("All requests failed"):
        if ALL_FAILED.search(doc.text, start, doc.span(start)[1]):
            problems.append(doc.problem("every request of the benchmark failed", start))
    return groups, problems


def _known(line: str) -> bool:
    return bool(SERVING_LINE.match(line) or SUCCESSFUL.match(line) or FAILED.match(line))


def one_batch(doc: Text) -> list[Group]:
    """sglang ``bench_one_batch``: one group per batch measured after ``Benchmark ...``
    (the warm-up's figures are left out)."""
    groups: list[Group] = []
    group: Group | None = None
    warmup = False
    if doc.text.find("Prefill. latency:") == -1:
        return groups  # every result starts with one: most outputs are done after one scan
    for start, end in doc.spans_with("Warmup ...", "Benchmark ...", "latency: "):
        line = doc.line(start, end)
        if line.strip() in ("Warmup ...", "Benchmark ..."):
            warmup = line.strip() == "Warmup ..."
            continue
        size = BATCH_SIZE.match(line)
        if size and group is not None and group.items and "batch_size" not in group.items[0][3]:
            for item in group.items:
                item[3]["batch_size"] = size.group(1)
            continue
        match = ONE_BATCH.match(line)
        if not match or warmup:
            continue
        stage = match.group(1).lower()
        if stage == "prefill" or group is None:
            group = Group(start)
            groups.append(group)
        prefix = "median_" if match.group(2) else ""
        latency, rate = number(match.group(3)), number(match.group(4))
        throughput = "overall_throughput" if stage == "total" else f"{prefix}{stage}_throughput"
        labels = dict(group.items[0][3]) if group.items else {}
        if latency is not None:
            group.add(f"{prefix}{stage}_latency_s", latency, "s", start, labels)
        if rate is not None:
            group.add(throughput, rate, "tok/s", start, dict(labels))
        if stage == "total":
            group = None
    return groups


def vllm_throughput(doc: Text) -> list[Group]:
    """``vllm bench throughput``: one group per ``Throughput:`` line."""
    groups = []
    for start, end in doc.spans_with("Throughput: "):
        match = VLLM_THROUGHPUT.match(doc.text, start, end)
        if not match:
            continue
        group = Group(start)
        group.add("requests_per_s", float(match.group(1)), "req/s", start, {})
        group.add("total_tokens_per_s", float(match.group(2)), "tok/s", start, {})
        if match.group(3) is not None:
            group.add("output_tokens_per_s", float(match.group(3)), "tok/s", start, {})
        groups.append(group)
    return groups


def vllm_latency(doc: Text) -> list[Group]:
    """``vllm bench latency``: one group per ``Avg latency:`` line and the lines after it."""
    groups: list[Group] = []
    for start, end in doc.spans_with(" latency: "):
        match = VLLM_LATENCY.match(doc.line(start, end))
        value = number(match.group(3)) if match else None
        if match is None or value is None:
            continue
        kind = match.group(1)
        if kind == "Avg" or not groups:
            groups.append(Group(start))
        name = f"p{match.group(2)}" if match.group(2) else kind.lower()
        groups[-1].add(f"{name}_latency_s", value, "s", start, {})
    return groups
