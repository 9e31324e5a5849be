"""What detectors read of output: the terminal's view (journal.terminal), on real captures."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from journal.terminal import clean, clean_chunks

CORPUS = Path(__file__).parent / "data" / "transcripts"
#: uv and pip through a pseudo-terminal: colours, `\r` redraws, cursor moves, CRLF ends
CAPTURED = sorted(p for p in CORPUS.glob("term-*.txt"))
RAW = [p.read_bytes().decode("utf-8", "replace") for p in CAPTURED]


def test_the_captures_hold_what_a_terminal_gets() -> None:
    assert len(CAPTURED) >= 10
    assert sum("\x1b[" in raw for raw in RAW) >= 8 and any("\r\n" in raw for raw in RAW)
    assert any("\r\x1b[2K" in raw for raw in RAW)  # pip's redrawn progress lines


def test_clean_keeps_every_line_and_leaves_no_control() -> None:
    for raw in RAW:
        shown = clean(raw)
        assert shown.count("\n") == raw.count("\n")
        assert "\x1b" not in shown and "\r" not in shown


def test_a_coloured_uv_line_reads_as_the_plain_one() -> None:
    raw = next(r for p, r in zip(CAPTURED, RAW, strict=True) if "color-downgrade" in p.name)
    lines = [clean(line) for line in raw.split("\n")]
    assert any(line.startswith(" - numpy==") for line in lines)
    assert any(line.startswith(" + numpy==") for line in lines)


def test_a_redraw_leaves_the_final_text() -> None:
    assert clean("Downloading 10%\rDownloading 100%\n") == "Downloading 100%\n"
    assert clean("done\r\n\x1b[?25h") == "done\n"
    assert clean("\x1b]0;root@gpu-box: ~\x07\x1b[01;32mroot@gpu-box\x1b[00m:~# ls") == (
        "root@gpu-box:~# ls"
    )


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_output_cleaned_chunk_by_chunk_is_the_output_cleaned_whole(data: st.DataObject) -> None:
    """However the recorder cut the bytes into chunks (inside an escape, between `\\r` and
    `\\n`), the text is the same, and each chunk starts on its own line."""
    raw = data.draw(st.sampled_from(RAW))
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(raw) - 1)), max_size=12)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    text, starts = clean_chunks(list(chunks))
    assert text == clean(raw)
    before = 0
    for chunk, start in zip(chunks, starts, strict=True):
        assert text.count("\n", 0, start) == raw.count("\n", 0, before)
        before += len(chunk)
