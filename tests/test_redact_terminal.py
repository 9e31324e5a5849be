"""Redaction reads what a terminal shows (issue 27): a secret in coloured output, split by a
colour code, in ``jq -C``'s or ``grep --color``'s output, under a ``\\r`` redraw or in a window
title is masked in the bytes as stored, the escape sequences kept so that colours still
render; a token glued to a word is masked by the boundaries its shape really has; a
recorder cutting coloured output into chunks splits no secret and no escape sequence; and
the ordinary lines of tests/test_redact_evidence.py survive whole, plain, coloured or printed
in pieces, beside the secrets, which do not."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import recorder
from journal.events import OutputChunk
from journal.output import decode
from journal.recorder import MAX_CHUNK, OutputRecorder
from journal.redact import MASK, Redactor
from journal.redact.spans import MASK_B
from journal.redact.terminal import ESCAPE_BYTES, shown
from journal.terminal import ESCAPE, clean
from tests.helpers import Clock
from tests.test_redact_evidence import EVIDENCE, SECRETS

TOKEN = b"ghp_abcdefghijklmnopqrstuvwxyz0123456789"
HF = b"hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"


def redact(data: bytes, listed: tuple[str, ...] = ()) -> bytes:
    return Redactor.for_run(list(listed), environ={}).bytes(data, "stdout")[0]


def escapes(data: bytes) -> list[bytes]:
    """The escape sequences in ``data``, in order (a string's text, which may be masked, left
    out: an OSC or DCS as its first two bytes)."""
    found = (m.group() for m in ESCAPE_BYTES.finditer(data))
    return [seq if seq[1:2] not in b"]PX^_" else seq[:2] for seq in found]


def b(text: str) -> bytes:
    """Test data written as text: ``{T}`` a GitHub token, ``{H}`` a Hugging Face one, ``{M}``
    the mask."""
    return text.format(T=TOKEN.decode(), H=HF.decode(), M=MASK).encode()


#: (as printed, the secret, what is stored): every escape sequence kept where it was, those
#: among the secret's characters after the mask
COLOURED = [
    (b("\x1b[32m{T}\x1b[0m"), TOKEN, b("\x1b[32m{M}\x1b[0m")),
    (
        b("\x1b[33mpassword\x1b[0m: hunter2-yaml"),
        b"hunter2-yaml",
        b("\x1b[33mpassword\x1b[0m: {M}"),
    ),
    (b("\x1b[1mHF_TOKEN\x1b[0m=value-123"), b"value-123", b("\x1b[1mHF_TOKEN\x1b[0m={M}")),
    # a token split by colour codes, and its prefix split too
    (TOKEN[:12] + b"\x1b[0m" + TOKEN[12:] + b" ok", TOKEN[12:], b("{M}\x1b[0m ok")),
    (
        b"gh\x1b[1m" + TOKEN[2:20] + b"\x1b[0m\x1b[2m" + TOKEN[20:] + b"\x1b[0m",
        TOKEN[2:20],
        b("{M}\x1b[1m\x1b[0m\x1b[2m\x1b[0m"),
    ),
    # the value coloured on its own, after the key's colour (jq -C, rich)
    (
        b('\x1b[34;1m"password"\x1b[0m\x1b[1;39m:\x1b[0m \x1b[0;32m"hunter2-jq"\x1b[0m'),
        b"hunter2-jq",
        b('\x1b[34;1m"password"\x1b[0m\x1b[1;39m:\x1b[0m \x1b[0;32m"{M}"\x1b[0m'),
    ),
    # a flag's value in bold, after a bold flag
    (
        b("vault login \x1b[1m--password\x1b[0m \x1b[1mpw-flag-77\x1b[0m"),
        b"pw-flag-77",
        b("vault login \x1b[1m--password\x1b[0m \x1b[1m{M}\x1b[0m"),
    ),
    # a keyword that grep --color split where it matched
    (
        b("HF_\x1b[01;31m\x1b[KTOK\x1b[m\x1b[KEN=grep-secret-9"),
        b"grep-secret-9",
        b("HF_\x1b[01;31m\x1b[KTOK\x1b[m\x1b[KEN={M}"),
    ),
    # a cursor move, an erase, a charset choice between the name and the value
    (
        b("\x1b[2K\x1b[1Gapi_key=\x1b(B\x1b[mkey-after-moves"),
        b"key-after-moves",
        b("\x1b[2K\x1b[1Gapi_key=\x1b(B\x1b[m{M}"),
    ),
    # the 8-bit CSI (U+009B) before a token
    (b("\u009b32m{H}\u009b0m"), HF, b("\u009b32m{M}\u009b0m")),
    # a \r redraw: the secret on the line it overwrote is masked too, the bar kept
    (
        b("token=abcdef123456\r\x1b[2K 45% |####      |\r\n"),
        b"abcdef123456",
        b("token={M}\r\x1b[2K 45% |####      |\r\n"),
    ),
    (
        b("10%\r\x1b[1mtoken:\x1b[0m sec\x1b[1mret-value\x1b[0m\n"),
        b"ret-value",
        b("10%\r\x1b[1mtoken:\x1b[0m {M}\x1b[1m\x1b[0m\n"),
    ),
    # a window title (OSC) holding a secret: not shown, but the bytes hold it
    (
        b("\x1b]0;deploy HF_TOKEN=title-secret-1\x07$ ls\n"),
        b"title-secret-1",
        b("\x1b]0;deploy HF_TOKEN={M}\x07$ ls\n"),
    ),
    (
        b("\x1b]8;;https://bob:link-pass-2@git.example.com/x\x1b\\repo\x1b]8;;\x1b\\\n"),
        b"link-pass-2",
        b("\x1b]8;;https://bob:{M}@git.example.com/x\x1b\\repo\x1b]8;;\x1b\\\n"),
    ),
    # private key lines in colour: each line masked, the lines kept
    (
        b(
            "-----BEGIN RSA PRIVATE KEY-----\n\x1b[2mMIIEpAIBAAKCAQEA3xKeyLine\x1b[0m\n"
            "QUJDREVGR0hJSktMTU5P\n-----END RSA PRIVATE KEY-----\n"
        ),
        b"MIIEpAIBAAKCAQEA3x",
        b(
            "-----BEGIN RSA PRIVATE KEY-----\n{M}\n{M}\n\x1b[2m\x1b[0m"
            "-----END RSA PRIVATE KEY-----\n"
        ),
    ),
]


@pytest.mark.parametrize(("printed", "secret", "stored"), COLOURED, ids=range(len(COLOURED)))
def test_a_secret_in_coloured_output_is_masked_and_the_colours_kept(
    printed: bytes, secret: bytes, stored: bytes
) -> None:
    out = redact(printed)
    assert out == stored
    assert secret not in out and secret not in shown(out)
    assert escapes(out) == escapes(printed)


def test_a_known_value_split_by_a_colour_code_is_masked() -> None:
    printed = b"said \x1b[31mcorp-\x1b[0msecret-42\x1b[0m ok\n"
    out = redact(printed, ("corp-secret-42",))
    assert out == b("said \x1b[31m{M}\x1b[0m\x1b[0m ok\n")


def test_jq_colour_output_of_a_password_is_masked_and_stays_json() -> None:
    """``jq -C``, run for real: keys and values in separate colours. What the terminal shows
    of what is stored is still the JSON, the password masked; the colours are all there."""
    doc = json.dumps({"password": "hunter2-jq-real", "user": "bob", "n": 3})
    printed = subprocess.run(
        ["jq", "-C", "."], input=doc.encode(), capture_output=True, check=True
    ).stdout
    assert b"\x1b[" in printed and b'"password"\x1b' in printed  # coloured as the issue says
    out = redact(printed)
    assert b"hunter2-jq-real" not in out
    assert json.loads(shown(out)) == {"password": MASK, "user": "bob", "n": 3}
    assert escapes(out) == escapes(printed)


def test_grep_colour_output_splitting_a_secret_name_is_masked(tmp_path: Path) -> None:
    """``grep --color=always TOK`` splits ``HF_TOKEN`` where it matched; the value is masked."""
    source = tmp_path / "env.sh"
    source.write_text("export HF_TOKEN=grep-real-secret-5 # set\nexport X=1\n")
    printed = subprocess.run(
        ["grep", "--color=always", "TOK", str(source)], capture_output=True, check=True
    ).stdout
    assert b"HF_TOKEN" not in printed and b"\x1b[" in printed
    out = redact(printed)
    assert b"grep-real-secret-5" not in out
    assert shown(out) == f"export HF_TOKEN={MASK} # set\n".encode()


# --- the view redaction reads is the detectors' view --------------------------------------

FRAGMENTS = (
    b"\x1b[32m|\x1b[0m|\x1b[1;39m|\x1b[38;5;208m|\x1b[2K|\x1b[?25l|\x1b[|\x1b|\x1b(B|\x1b7|\x1b ["
    b"|\x1b\\|\x1b]0;title\x07|\x1b]8;;http://x\x1b\\|\x1bP1$r\x1b\\|\xc2\x9b1m|\x00|ab| |\n|\r"
    b"|12|m|[1m|]|P|(|token=|ghp_|\xc3\xa9"
).split(b"|")


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14))
def test_redaction_reads_the_text_the_detectors_read(pieces: list[bytes]) -> None:
    """What redaction reads (:func:`shown`) is the terminal module's escape removal, the one
    the detectors' clean view starts with, whatever the bytes (odd, unfinished, 8-bit)."""
    data = b"".join(pieces)
    view = shown(data)
    assert view == ESCAPE_BYTES.sub(b"", data)
    text = data.decode("utf-8", "surrogateescape")
    assert view.decode("utf-8", "surrogateescape") == ESCAPE.sub("", text)
    assert clean(view.decode("utf-8", "surrogateescape")) == clean(text)


#: lines holding a secret, and the secret
LINES = [
    (b"export HF_TOKEN=" + HF, HF[3:]),
    (b"pulled " + TOKEN + b" ok", TOKEN[4:]),
    (b'{"password": "hunter2-json", "user": "bob"}', b"hunter2-json"),
    (b"password: yaml pass with blanks", b"with blanks"),
    (b"curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123'", b"abcdefghijklmnopqrs"),
    (b"git clone https://deploy:pa55-word-77@git.example.com/x.git", b"pa55-word-77"),
    (b"said corp-secret-42 twice", b"corp-secret-42"),
    # a known value masked first, then a pattern's match over it and more
    (b"> Authorization: Bearer corp-secret-42 and-more", b"and-more"),
]
SGR = st.sampled_from([b"\x1b[0m", b"\x1b[1m", b"\x1b[32m", b"\x1b[1;34m", b"\x1b[38;5;12m"])
OTHER = st.sampled_from([b"\x1b[K", b"\x1b[2C", b"\x1b]0;t\x07", b"\x1b(B", b"\x1b7"])


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(LINES),
    st.lists(st.tuples(st.floats(0, 1), st.one_of(SGR, OTHER)), min_size=1, max_size=8),
)
def test_a_secret_is_masked_however_escape_sequences_interleave_with_it(
    line: tuple[bytes, bytes], inserts: list[tuple[float, bytes]]
) -> None:
    """Escape sequences put anywhere in a line, inside the secret, its name, its quotes:
    what is stored shows as the plain line redacted, and keeps every sequence in order."""
    plain, secret = line
    printed = plain
    for where, seq in sorted(inserts, reverse=True):
        at = round(where * len(printed))
        while _inside_escape(printed, at):
            at -= 1
        printed = printed[:at] + seq + printed[at:]
    out = redact(printed, ("corp-secret-42",))
    assert secret not in out and secret not in shown(out)
    assert shown(out) == redact(plain, ("corp-secret-42",))
    assert escapes(out) == escapes(printed)


def _inside_escape(data: bytes, at: int) -> bool:
    return any(m.start() < at < m.end() for m in ESCAPE_BYTES.finditer(data))


# --- glued tokens: the boundaries a shape really has ----------------------------------------

#: (as printed, the secret): masked glued to a word character
GLUED = [
    (b"x" + TOKEN, TOKEN[4:]),
    (b"a" * 40 + TOKEN, TOKEN[4:]),
    (b"_" + TOKEN, TOKEN[4:]),
    (b"tokenghs_" + TOKEN[4:], TOKEN[4:]),
    (b"m" + TOKEN, TOKEN[4:]),  # a colour code's m, had the ESC [ 32 been lost
    (b"32m" + HF, HF[3:]),
    (b"my" + HF, HF[3:]),
    (b"x" + b"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGH", b"11ABCDEFG0"),
    (b"xglpat-abcdefghij0123456789", b"abcdefghij0123456789"),
    (b"tokxoxb-123456789012-abcdefghijklmnop", b"abcdefghijklmnop"),
    (b"keyAIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", b"SyA1b2C3d4E5f6G7h8I9j0K1l2M3"),
    (b"idAKIAIOSFODNN7EXAMPLE", b"IOSFODNN7EXAMPLE"),
    (b"key_AKIAIOSFODNN7EXAMPLE", b"IOSFODNN7EXAMPLE"),
    (b"xnpm_abcdefghijklmnopqrstuvwxyz0123456789", b"abcdefghijklmnopqrstuvwxyz"),
    (b"xshpat_" + b"0123456789abcdef" * 2, b"0123456789abcdef" * 2),
    (b"xsq0csp-" + b"q" * 43, b"q" * 43),
    (b"xeyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.SflKxwRJSMeKKF2QT4fw", b"SflKxwRJSMeKKF2QT4fw"),
]
#: glued to a word that ends as a prefix begins: ordinary words, left
WORDS = [
    b"/dev/disk-by-uuid-0b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e",  # sk- after i
    b"task-queue-worker-for-distributed-training-jobs",
    b"risk_live_DashboardMetricsRefresherV2",  # sk_live_ after i
    b"work_live_StreamingUpdatesEnabledForUsers",  # rk_live_ after o
    b"testpypi-upload-credentials-helper-for-ci-pipelines-of-the-team",  # pypi- after t
    b"load_hf_QwenForCausalLMCheckpointShards(path)",  # hf_ after _
    b"SOUTHEASTASIA0123456789ABCDEFGHIJ",  # an AWS id's A in a run of capitals
    b"HMAC" + b"0123456789abcdef" * 2,  # Twilio's AC after M
    b"MSG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ",  # SG. after M
    b"xoxo-gossip-girl-fan-club",  # no Slack token
]


@pytest.mark.parametrize(("printed", "secret"), GLUED, ids=[p[:16].decode() for p, _ in GLUED])
def test_a_token_glued_to_a_word_is_masked(printed: bytes, secret: bytes) -> None:
    for line in (printed, b"said " + printed + b" twice", b"\x1b[32m" + printed + b"\x1b[0m"):
        out = redact(line)
        assert secret not in out and MASK_B in out, out


@pytest.mark.parametrize("word", WORDS, ids=[w[:16].decode() for w in WORDS])
def test_a_word_that_ends_as_a_prefix_begins_is_left(word: bytes) -> None:
    for line in (word, b"using " + word + b" now", b"\x1b[1m" + word + b"\x1b[0m"):
        assert redact(line) == line


# --- evidence and secrets beside each other: plain, coloured, in pieces ---------------------


def colour_words(line: str) -> bytes:
    """``line`` as a coloured CLI prints it: each word in its colour, each number in another."""
    out = re.sub(r"[^\s]+", lambda m: f"\x1b[1;3{len(m.group()) % 8}m{m.group()}\x1b[0m", line)
    return out.encode()


def colour_chars(line: str) -> bytes:
    """``line`` with a colour code before every character (a gradient)."""
    return "".join(
        c if c == "\n" else f"\x1b[38;5;{i % 256}m{c}" for i, c in enumerate(line)
    ).encode()


@pytest.mark.parametrize("line", EVIDENCE)
def test_ordinary_lines_in_colour_come_out_as_printed(line: str) -> None:
    for printed in (colour_words(line), colour_chars(line)):
        assert redact(printed) == printed


@pytest.mark.parametrize(("printed", "secret"), SECRETS, ids=[p for p, _ in SECRETS])
def test_secrets_in_colour_are_still_masked(printed: str, secret: str) -> None:
    for coloured in (colour_words(printed), colour_chars(printed)):
        out = redact(coloured)
        assert secret.encode() not in shown(out) and MASK_B in shown(out), shown(out)
        assert escapes(out) == escapes(coloured)


def record(clock: Clock, pieces: list[bytes], redactor: Redactor, wait: float = 2.0) -> bytes:
    """What a recorder stores of ``pieces`` printed ``wait`` seconds apart (ticking every
    0.1 s, so that each unfinished line is held past PARTIAL_HOLD_S)."""
    chunks: list[OutputChunk] = []
    rec = OutputRecorder(chunks.extend, "run", "here", redactor)
    for piece in pieces:
        rec.feed("stdout", piece)
        for _ in range(round(wait / 0.1)):
            clock.now += 0.1
            rec.tick()
    rec.close()
    assert [c.size for c in chunks] == [len(decode(c)) for c in chunks]
    return b"".join(decode(c) for c in chunks)


def _blanks(line: bytes) -> list[int]:
    return [i + 1 for i, b in enumerate(line) if b in b" \t"]


def _pauses(line: bytes) -> list[int]:
    """Where a program pauses in printing ``line``: at each blank after its label (``Time to
    first token: `` then the figure), at each blank of a line without one. (Not between a
    label's words: what of the line the recorder stored already is no context of the rest.)"""
    label = re.search(rb":(?:\x1b\[[0-9;]*m)*[ \t]", line)
    return [at for at in _blanks(line) if label is None or at > label.start()]


@pytest.mark.parametrize("line", EVIDENCE)
def test_ordinary_lines_printed_in_pieces_are_stored_as_printed(clock: Clock, line: str) -> None:
    """A line printed up to a blank, the rest seconds later (the recorder stores what of it
    can no longer become a secret first): stored as printed, wherever the pause came. The
    label before ``token:`` is held with it (``Time to first token: 35.2``)."""
    redactor = Redactor()
    for printed in (line.encode(), colour_words(line)):
        for at in _pauses(printed) or [len(printed) // 2]:
            stored = record(clock, [printed[:at], printed[at:] + b"\n"], redactor)
            assert stored == printed + b"\n", (at, stored)


@pytest.mark.parametrize(("printed", "secret"), SECRETS, ids=[p for p, _ in SECRETS])
def test_secrets_printed_in_pieces_are_masked(clock: Clock, printed: str, secret: str) -> None:
    redactor = Redactor()
    for data in (printed.encode(), colour_words(printed)):
        for at in [*_blanks(data), len(data) // 2]:
            stored = record(clock, [data[:at], data[at:] + b"\n"], redactor, wait=1.5)
            assert secret.encode() not in shown(stored), (at, stored)


#: (pieces printed seconds apart, the secret): coloured secrets cut anywhere, inside an escape
#: sequence too
COLOURED_PIECES = [
    ([b"\x1b[32m" + TOKEN[:15], TOKEN[15:] + b"\x1b[0m done\n"], TOKEN[4:]),
    ([b"\x1b[32m", TOKEN + b"\x1b[0", b"m done\n"], TOKEN[4:]),
    ([b"pulled \x1b[3", b"2m" + TOKEN[:9], TOKEN[9:] + b"\x1b[0m\n"], TOKEN[4:]),
    ([b"\x1b[1mHF_TOKEN\x1b[0m=", b"split-", b"value-99\n"], b"value-99"),
    ([b"HF_\x1b[01;31m\x1b[KTOK", b"\x1b[m\x1b[KEN=gr-", b"piece-7\n"], b"piece-7"),
    ([b'\x1b[34;1m"password"\x1b[0m: \x1b[0;32m"hunter', b'2-pieces"\n'], b"2-pieces"),
    ([b"said \x1b[31mcorp-", b"secret-42\x1b[0m ok\n"], b"secret-42"),
]


@pytest.mark.parametrize(("pieces", "secret"), COLOURED_PIECES, ids=range(len(COLOURED_PIECES)))
def test_a_coloured_secret_printed_in_pieces_is_redacted_whole(
    clock: Clock, pieces: list[bytes], secret: bytes
) -> None:
    redactor = Redactor.for_run(["corp-secret-42"], {}, {})
    stored = record(clock, pieces, redactor)
    whole = b"".join(pieces)
    assert secret not in stored and secret not in shown(stored)
    assert stored == redactor.bytes(whole, "stdout")[0]  # as if redacted in one piece
    assert escapes(stored) == escapes(whole)


def test_a_long_coloured_line_is_never_cut_inside_a_secret_or_an_escape() -> None:
    """A 700 KiB coloured line without a blank (a minified log in colour), tokens split by
    colour codes around every place the recorder may cut it: none is stored, and every
    chunk holds whole escape sequences only (its own view is the line's)."""
    split_token = TOKEN[:10] + b"\x1b[0m\x1b[1m" + TOKEN[10:]
    unit = b"\x1b[32mx\x1b[0m,"
    redactor = Redactor.for_run([], {}, {})
    for shift in range(-80, 81, 7):
        line = b""
        for i in range(3):
            at = (i + 1) * MAX_CHUNK - recorder.LONG_LINE_SLACK + shift + 40 * i
            line += unit * ((at - len(line)) // len(unit)) + split_token + b","
        data = line + unit * ((700 * 1024 - len(line)) // len(unit)) + b"\n"
        chunks: list[OutputChunk] = []
        rec = OutputRecorder(chunks.extend, "run", "here", redactor)
        for start in range(0, len(data), 64 * 1024):
            rec.feed("stdout", data[start : start + 64 * 1024])
        rec.close()
        stored = [decode(c) for c in chunks]
        assert len(stored) >= 3
        out = b"".join(stored)
        assert TOKEN[10:] not in out and TOKEN[:10] not in out, shift
        assert out == redactor.bytes(data, "stdout")[0]
        assert b"".join(shown(c) for c in stored) == shown(out)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(SGR, OTHER, st.sampled_from([b"ab", b" ", b"=", TOKEN])), max_size=30))
def test_a_cut_is_never_inside_an_escape_sequence(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    spans = [m.span() for m in ESCAPE_BYTES.finditer(data)]
    redactor = Redactor()
    for cut in range(len(data) + 1):
        moved = redactor.safe_cut(data, cut, 0)
        assert 0 <= moved <= cut
        assert not any(a < moved < b for a, b in spans), (cut, moved)
    held = redactor.tail(data)
    assert not any(a < held < b for a, b in spans)
