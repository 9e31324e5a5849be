"""A run's output read chunk by chunk (journal/output.py): the one tail reader, and the end of
an output as one bounded text for a benchmark's parser, with its true line numbers."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from journal.benchmarks.parsers import parse
from journal.events import OutputChunk
from journal.output import encode, last_text, output_text, tail
from journal.service.bench import from_line

DATA = Path(__file__).parent / "data" / "bench"


def _chunk(data: bytes | str, stream: str = "stdout") -> OutputChunk:
    raw = data.encode() if isinstance(data, str) else data
    body, encoding = encode(raw)
    return OutputChunk(
        run="r1", host_name="h", stream=stream, data=body, encoding=encoding, size=len(raw), t=0.0
    )


def test_tail_gives_the_last_lines_and_counts_them_all() -> None:
    chunks = [_chunk("one\ntwo\nthr"), _chunk("ee\nfour\n"), _chunk("five")]
    found = tail(chunks, 3, limit=100)
    assert [line.text for line in found.lines] == [b"three", b"four", b"five"]
    assert found.total == 5 and found.before == 2
    assert tail([_chunk("a\nb\n")], 5, limit=100).total == 2  # a last newline ends a line
    assert tail([], 5, limit=100).total == 0


def test_tail_of_one_stream_runs_its_lines_on_across_the_other() -> None:
    chunks = [_chunk("err ", "stderr"), _chunk("out\n"), _chunk("goes on\n", "stderr")]
    found = tail(chunks, 5, limit=100, stream="stderr", text=True)
    assert [line.text for line in found.lines] == ["err goes on"] and found.total == 1


def test_a_long_line_keeps_its_end_or_its_start_and_counts_the_rest() -> None:
    chunks = [_chunk("x" * 50), _chunk("y" * 50 + "\nshort\n")]
    end = tail(chunks, 5, limit=10)
    assert end.lines[0].text == b"y" * 10 and end.lines[0].cut == 90
    assert end.lines[1].text == b"short" and end.lines[1].cut == 0
    start = tail(chunks, 5, limit=10, keep="start", text=True)
    assert start.lines[0].text == "x" * 10 and start.lines[0].cut == 90


def test_bytes_that_are_not_utf8_come_back_exact_or_as_text_replaced() -> None:
    chunks = [_chunk(b"caf\xc3\xa9 \xff\n")]
    assert tail(chunks, 1, limit=100).lines[0].text == b"caf\xc3\xa9 \xff"
    assert tail(chunks, 1, limit=100, text=True).lines[0].text == "café \ufffd"


def test_the_tail_of_a_200_mb_line_holds_a_chunk_at_a_time() -> None:
    piece = "z" * (256 * 1024)

    def chunks() -> Iterator[OutputChunk]:
        for _ in range(800):  # 200 MB, no newline
            yield _chunk(piece)

    tracemalloc.start()
    try:
        found = tail(chunks(), 40, limit=16_384)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found.total == 1 and found.lines[0].cut == 800 * len(piece) - 16_384
    assert peak < 5_000_000


def test_last_text_is_the_whole_output_when_it_is_short() -> None:
    chunks = [_chunk("one\n"), _chunk("two\n")]
    assert last_text(chunks, 100) == ("one\ntwo\n", 1)


def test_last_text_starts_at_a_line_and_says_which() -> None:
    chunks = [_chunk(f"line {i}\n") for i in range(1, 1001)]
    text, first = last_text(chunks, 100)
    whole = output_text(chunks)
    assert whole.endswith(text) and len(text) <= 100
    assert text.startswith(f"line {first}\n")
    one = [_chunk("w" * 1000)]
    assert last_text(one, 100) == ("w" * 100, 1)  # inside one long line: its end


@pytest.mark.parametrize("capture", sorted(p.name for p in DATA.glob("*.txt")))
def test_a_parser_reading_the_end_of_a_long_output_reads_its_figures_on_their_lines(
    capture: str,
) -> None:
    printed = (DATA / capture).read_text()
    parser = {"nccl": "nccl-tests", "llama": "llama-bench", "sglang": "sglang"}.get(
        capture.split("-")[0], "vllm"
    )
    before = "".join(f"progress {i}%\n" for i in range(20_000))
    chunks = [_chunk(before[i : i + 4096]) for i in range(0, len(before), 4096)]
    chunks += [_chunk(printed)]
    text, first = last_text(chunks, len(printed) + 500)
    assert first > 1
    whole = parse(parser, before + printed)
    assert from_line(parse(parser, text), first) == whole


def test_a_benchmark_too_long_to_keep_is_parsed_from_the_end_of_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the recorder's KEEP_LIMIT a parser reads the end of the recorded output (at most
    PARSED_LIMIT), and its figures keep the lines they have in the whole output."""
    import journal.recorder
    import journal.service.bench
    from journal.events import MetricRecorded
    from journal.store import EventStore
    from tests.helpers import journal as run_journal
    from tests.helpers import text, write_runbook

    monkeypatch.setattr(journal.recorder, "KEEP_LIMIT", 10_000)
    monkeypatch.setattr(journal.service.bench, "PARSED_LIMIT", 5_000)
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "long"\n\n[hosts.box]\nssh = "local"\n\n'
        "[benchmarks.hash]\n"
        "run = \"seq 1 20000; echo 'sha256: 812.5 MB/s'\"\n"
        'parser = "regex"\n'
        "pattern = ['sha256: (?P<sha256>[0-9.]+) MB/s', '^(?P<early>1)$']\n",
    )
    db = tmp_path / "j.db"
    done = run_journal("run", "bench", "hash", db=db, runbook=rb)
    assert done.returncode == 0, text(done.stderr)
    store = EventStore(str(db))
    try:
        found = [r.event for r in store.read("long") if isinstance(r.event, MetricRecorded)]
    finally:
        store.close()
    # the first line's figure is not in the end read; the last line's is, on its own line
    assert [(m.name, m.value, m.line, m.text) for m in found] == [
        ("sha256", 812.5, 20_001, "sha256: 812.5 MB/s")
    ]
