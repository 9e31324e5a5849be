"""One verdict for figures, everywhere (issue 26, part 3): the change between two sets of figures
(the repeated samples of one benchmark run, or a single figure) is decided once
(`journal.projections.verdict.judge`, median against median) and every surface says that
answer with the same medians: the line of `journal run bench`, the story of `journal status`
and `journal log` (text and JSON), the journal page and the throughput page, the postmortem in
JSON, Markdown and HTML, and the `throughput-regression` detector, which fires exactly where
the verdict is `worse`.

Figures are recorded for real: a regex benchmark of the runbook prints the samples, `journal
run bench --label phase=…` records them around a step (`journal run step upgrade`), and the
surfaces read the store. The samples of a loaded machine are those measured on this project's
2-core machine: the demo's pure-Python matmul timed on the wall clock while four other
processes thrashed the memory bus (7.0–11.4 MFLOP/s) against the same machine idle
(36.1–36.5), and timed in CPU time under the same load (31.2–32.2, the 10% a loaded memory bus
still takes).
"""

from __future__ import annotations

import json
import re
import shlex
import statistics
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from journal.export.chart import number, signed_percent
from journal.export.impact import figure
from journal.projections.verdict import NOISE_PERCENT, judge
from journal.web import create_app
from tests.helpers import journal, text, write_runbook

NAME = "verdict"

#: The demo's matmul on a loaded 2-core machine (see the module's docstring), MFLOP/s.
WALL_LOADED = [7.0, 11.4, 8.8, 8.8, 7.6]
IDLE = [36.3, 36.2, 36.5, 36.3, 36.1]
CPU_LOADED = [32.1, 32.2, 31.2, 31.3, 32.2]


def _toml(value: object) -> str:
    """A TOML value (strings, tables of strings) as the runbook writes it."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def _runbook(folder: Path, bench: dict[str, object]) -> Path:
    table = "\n".join(f"{key} = {_toml(value)}" for key, value in bench.items())
    return write_runbook(
        folder,
        f'[journal]\nname = "{NAME}"\n\n[hosts.box]\nssh = "local"\n\n'
        '[[steps]]\nname = "upgrade"\nrun = "echo upgraded"\n\n'
        f"[benchmarks.b]\n{table}\n",
    )


def _table(metric: str, unit: str, samples: Path) -> dict[str, object]:
    return {
        "run": f"cat {shlex.quote(str(samples))}",
        "parser": "regex",
        "pattern": rf"sample \d+: (?P<{metric}>[0-9.]+) {unit}",
        "units": {metric: unit},
    }


def _demo_table(demo_runbook: Path, samples: Path) -> dict[str, object]:
    """The demo's own `cpu-matmul` table (its pattern, units, labels: the declaration that it is
    a control), its command swapped for one printing the given samples as it prints them."""
    table = tomllib.loads(demo_runbook.read_text())["benchmarks"]["cpu-matmul"]
    return {**table, "run": f"cat {shlex.quote(str(samples))}"}


@dataclass
class Recorded:
    db: Path
    runbook: Path
    bench_lines: str  # what `journal run bench` said after the second run


def _record(
    folder: Path, bench: dict[str, object], samples: Path, line: str, sets: list[list[float]]
) -> Recorded:
    """Each set printed by one `journal run bench` run, phase before then after, with the
    runbook's step between them."""
    rb = _runbook(folder, bench)
    db = folder / "journal.db"
    said = ""
    for phase, values in zip(("before", "after"), sets, strict=True):
        samples.write_text("".join(line.format(i=i + 1, v=v) for i, v in enumerate(values)))
        done = journal("run", "bench", "b", "--label", f"phase={phase}", db=db, runbook=rb)
        assert done.returncode == 0, text(done.stderr)
        said = text(done.stderr)
        if phase == "before":
            assert journal("run", "step", "upgrade", db=db, runbook=rb).returncode == 0
    return Recorded(db, rb, said)


def _pct(before: float, after: float) -> str:
    return f"{(after - before) / before * 100:+.1f}%"


SAID = {"better": " better", "worse": " worse", "noise": " within noise"}
WORDS = {"better": ", better", "worse": ", worse", "noise": ", within noise"}


def _spread(values: list[float]) -> str:
    return f"median of {len(values)}: {figure(min(values))}–{figure(max(values))}"


def assert_every_surface_says(
    rec: Recorded,
    metric: str,
    unit: str,
    before: list[float],
    after: list[float],
    verdict: str,
    headline: bool,
) -> None:
    """Every surface gives ``verdict`` and the two sets' medians for the series."""
    b, a = statistics.median(before), statistics.median(after)
    pct = _pct(b, a)
    db, rb = rec.db, rec.runbook

    # `journal run bench`: the last figure of the run, with its set against the one before
    now = f"median {figure(a, unit)} of {len(after)} " if len(after) > 1 else ""
    if now:
        now += f"({figure(min(after))}–{figure(max(after))}), "
    was = figure(b, unit) + (
        f" (median of {len(before)}: {figure(min(before))}–{figure(max(before))})"
        if len(before) > 1
        else ""
    )
    assert f"{now}{pct} against {was} (phase before → after){WORDS.get(verdict, '')}" in (
        rec.bench_lines
    ), rec.bench_lines

    # the story: `journal status` and `journal log`, text and JSON (rates only: the headline)
    if headline:
        story = (
            f"{figure(b)} → {figure(min(a, b))} → {figure(a)} {unit}, first → worst → last "
            f"({pct} first to last{WORDS.get(verdict, '')})"
        )
        for command in ("status", "log"):
            said = text(journal(command, db=db, runbook=rb).stdout)
            assert story in said, said
        told = json.loads(journal("status", "--format", "json", db=db, runbook=rb).stdout)
        head = told["story"]["headline"]
        assert (head["first"], head["last"], head["verdict"]) == (b, a, verdict)

    # the web: the throughput page's row, and the journal page's headline
    client = create_app({"DB": str(db), "TESTING": True}).test_client()
    client.get(f"/j/{NAME}/story")
    page = client.get(f"/j/{NAME}/throughput").get_data(as_text=True)
    rows = re.findall(rf'<tr class="(overall|along) (\w+)" data-series="{metric}-', page)
    assert rows == [("overall", verdict)], rows  # one row: never one per sample
    row = re.search(rf'<tr class="overall \w+" data-series="{metric}-.*?</tr>', page, re.S)
    assert row is not None
    cells = [
        " ".join(re.sub(r"<[^>]+>", " ", c).split())
        for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row.group(0), re.S)
    ]
    assert cells[3].startswith(f"{number(b)} {unit}") and cells[4].startswith(f"{number(a)} {unit}")
    assert (cells[6], cells[7]) == (signed_percent((a - b) / b * 100), verdict)
    if len(after) > 1:
        assert cells[4].endswith(f"{number(min(after))}–{number(max(after))} ×{len(after)}")
    if headline:
        home = client.get(f"/j/{NAME}").get_data(as_text=True)
        assert f'<span class="percent {verdict}" title="first to last: {verdict}">' in home

    # the postmortem: JSON, Markdown, HTML
    doc = json.loads(journal("export", "postmortem", "--format", "json", db=db, runbook=rb).stdout)
    impact = doc["impact"]
    [series] = [s for s in impact["throughput"] + impact["other"] if s["metric"] == metric]
    overall = series["overall"]
    assert (overall["before"], overall["after"], overall["verdict"]) == (b, a, verdict)
    assert (overall["before_samples"], overall["after_samples"]) == (len(before), len(after))
    assert overall["after_spread"] == [min(after), max(after)]
    assert [c["verdict"] for c in series["changes"]] == [verdict]  # one change of set
    if headline:
        assert doc["story"]["headline"]["verdict"] == verdict
    md = text(journal("export", "postmortem", "--format", "md", db=db, runbook=rb).stdout)
    side = f"`{figure(a, unit)}`" + (f" ({_spread(after)})" if len(after) > 1 else "")
    escaped = metric.replace("_", "\\_")  # as Markdown escapes it
    rows_md = [r for r in md.splitlines() if r.startswith(f"| {escaped}")]
    assert len(rows_md) == 1, rows_md
    assert side in rows_md[0] and f"| **{pct}**{SAID.get(verdict, '')} |" in rows_md[0]
    html = text(journal("export", "postmortem", "--format", "html", db=db, runbook=rb).stdout)
    assert f'<td class="num {verdict}"><strong>{pct}</strong>' in html

    # the detector: a finding exactly where the verdict is worse, with the same medians
    report = json.loads(journal("pitfalls", "--all", "--format", "json", db=db, runbook=rb).stdout)
    found = [f for f in report["findings"] if f["id"] == "throughput-regression"]
    if verdict != "worse":
        assert found == [], found
        return
    [fell] = found
    verb = "fell" if a < b else "rose"
    title = f"{metric} {verb} {abs(a - b) / b:.1%}: {b:,.2f} → {a:,.2f} {unit}"
    if len(before) > 1 or len(after) > 1:
        title += f" (medians of {len(before)} and {len(after)} samples)"
    assert fell["title"].startswith(title), fell["title"]


# -- the rule, at its boundaries ---------------------------------------------------------------


def test_the_rule_at_the_noise_boundary_for_single_figures_and_repeated_samples() -> None:
    assert NOISE_PERCENT == 5.0
    # single figures: within 5% of the earlier is noise, beyond it a change, either direction
    assert judge([100.0], [95.0]).verdict == "noise"
    assert judge([100.0], [94.9]).verdict == "worse"
    assert judge([100.0], [105.0], "lower").verdict == "noise"
    assert judge([100.0], [105.1], "lower").verdict == "worse"
    assert judge([100.0], [94.9], "lower").verdict == "better"
    # repeated samples stand as their median, whatever one slow sample says
    v = judge([100.0, 100.2, 100.4, 100.1, 100.3], [30.0, 100.3, 100.0, 100.2, 100.1])
    assert (v.before, v.after, v.verdict) == (100.2, 100.1, "noise")
    # tight samples apart by less than 5% are still noise (runs drift more than samples do)
    tight = [100.0, 100.2, 100.4, 100.1, 100.3]
    assert judge(tight, [95.2, 95.4, 95.3, 95.1, 95.5]).verdict == "noise"  # -4.9%
    assert judge(tight, [94.9, 95.0, 95.1, 94.8, 95.2]).verdict == "worse"  # -5.2%
    # beyond 5%, the spreads decide: overlapping ranges are noise, ranges apart a change
    assert judge([60, 69, 70, 72, 74], [58, 62, 64, 66, 70]).verdict == "noise"  # -8.6%
    assert judge([68, 69, 70, 71, 72], [58, 59, 60, 61, 62]).verdict == "worse"  # -14.3%
    # a single figure against repeated samples: inside their range is noise
    assert judge([60, 69, 70, 72, 74], [61.0]).verdict == "noise"  # -12.9%, inside 60-74
    assert judge([68, 69, 70, 71, 72], [61.0]).verdict == "worse"
    # the declaration of a control: any change is the machine's
    assert judge(WALL_LOADED, IDLE, control=True).verdict == "noise"
    assert judge(WALL_LOADED, IDLE).verdict == "better"
    v = judge(IDLE, CPU_LOADED)
    assert (v.verdict, round(v.percent or 0, 1)) == ("worse", -11.6)
    assert judge(IDLE, CPU_LOADED, control=True).verdict == "noise"
    # a count is neither; equal medians are the same
    assert judge([32.0], [16.0], "count").verdict == "count"
    assert judge([1.0, 2.0, 3.0], [2.0]).verdict == "same"


# -- every surface, recorded for real -----------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "verdict"),
    [
        # repeated samples, tight, 4.9% apart: noise; 5.2% apart: a regression
        ([100.0, 100.2, 100.4, 100.1, 100.3], [95.2, 95.4, 95.3, 95.1, 95.5], "noise"),
        ([100.0, 100.2, 100.4, 100.1, 100.3], [94.9, 95.0, 95.1, 94.8, 95.2], "worse"),
        # medians 8.6% apart, spreads overlapping: noise
        ([60.0, 69.0, 70.0, 72.0, 74.0], [58.0, 62.0, 64.0, 66.0, 70.0], "noise"),
        # single figures at the boundary: -5.0% is noise, -5.1% is not; +20% is better
        ([100.0], [95.0], "noise"),
        ([100.0], [94.9], "worse"),
        ([100.0], [120.0], "better"),
    ],
)
def test_a_rate_reads_the_same_on_every_surface(
    tmp_path: Path, before: list[float], after: list[float], verdict: str
) -> None:
    samples = tmp_path / "samples.txt"
    bench = _table("mflops", "MFLOP/s", samples)
    rec = _record(tmp_path, bench, samples, "sample {i}: {v} MFLOP/s\n", [before, after])
    assert_every_surface_says(rec, "mflops", "MFLOP/s", before, after, verdict, headline=True)


@pytest.mark.parametrize(
    ("before", "after", "verdict"),
    [
        # a latency is better lower: +6.3% is worse, -6.3% better, +4.9% noise
        ([50.0, 51.0, 52.0, 50.5, 51.5], [54.0, 54.5, 55.0, 53.5, 54.2], "worse"),
        ([54.0, 54.5, 55.0, 53.5, 54.2], [50.0, 51.0, 52.0, 50.5, 51.5], "better"),
        ([100.0], [104.9], "noise"),
    ],
)
def test_a_latency_reads_the_same_on_every_surface(
    tmp_path: Path, before: list[float], after: list[float], verdict: str
) -> None:
    samples = tmp_path / "samples.txt"
    bench = _table("ttft_ms", "ms", samples)
    rec = _record(tmp_path, bench, samples, "sample {i}: {v} ms\n", [before, after])
    assert_every_surface_says(rec, "ttft_ms", "ms", before, after, verdict, headline=False)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (WALL_LOADED, IDLE),  # +312%: the second demo run's "+245.4% better", and worse
        (IDLE, WALL_LOADED),
        (IDLE, CPU_LOADED),  # -11.6%: what CPU time leaves of a loaded memory bus
    ],
)
def test_the_demo_cpu_benchmark_reads_as_noise_everywhere_however_loaded_the_machine(
    demo_journal: tuple[Path, Path], tmp_path: Path, before: list[float], after: list[float]
) -> None:
    samples = tmp_path / "samples.txt"
    bench = _demo_table(demo_journal[1], samples)
    assert bench["labels"] == {"control": "yes"}  # the demo's benchmark declares it
    line = "matmul n=60 sample {i}: {v} MFLOP/s\n"  # as the demo's benchmark prints them
    rec = _record(tmp_path, bench, samples, line, [before, after])
    assert_every_surface_says(rec, "matmul_mflops", "MFLOP/s", before, after, "noise", True)
    # the same samples from a benchmark that declares nothing are judged by their figures
    bare = {k: v for k, v in bench.items() if k != "labels"}
    other = tmp_path / "undeclared"
    other.mkdir()
    rec = _record(other, bare, samples, line, [before, after])
    said = "better" if statistics.median(after) > statistics.median(before) else "worse"
    assert_every_surface_says(rec, "matmul_mflops", "MFLOP/s", before, after, said, True)
