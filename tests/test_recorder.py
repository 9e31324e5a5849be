"""The recorder holds back what may still become a secret: a secret printed in pieces however
far apart, or straddling the cut of a line longer than a chunk, is redacted whole; ordinary
output is stored as promptly as before, and the chunks stay byte-exact."""

from __future__ import annotations

import pytest

from journal import recorder
from journal.events import OutputChunk
from journal.output import decode
from journal.recorder import FLUSH_S, MAX_CHUNK, PARTIAL_HOLD_S, OutputRecorder
from journal.redact import Redactor
from tests.helpers import Clock

KNOWN = "correct horse battery staple"


def record(clock: Clock, pieces: list[tuple[bytes, float]], stream: str = "stdout"):
    """Feed ``pieces`` (bytes, then seconds that pass, ticking every 0.1 s) to a recorder;
    its chunks and the redactor."""
    redactor = Redactor.for_run([KNOWN], {"HF_TOKEN": "hf_" + "E" * 34}, {})
    chunks: list[OutputChunk] = []
    rec = OutputRecorder(chunks.extend, "run", "here", redactor)
    for data, wait in pieces:
        rec.feed(stream, data)
        for _ in range(round(wait / 0.1)):
            clock.now += 0.1
            rec.tick()
    rec.close()
    return chunks, redactor


def stored(chunks: list[OutputChunk]) -> bytes:
    return b"".join(decode(c) for c in chunks)


#: (what comes before, the secret, what follows): each printed in pieces 2 s apart
SPLIT = [
    (b"export HF_TOKEN=", b"hf_" + b"T" * 34, b"\n"),
    (b'{"password": "', b"pw with blanks Zq9", b'", "user": "bob"}\n'),
    (b"curl -H 'Authorization: Bearer ", b"tok-bearer-Kx81Lm", b"' https://x\n"),
    (b"pulled ", b"ghp_" + b"G" * 36, b" ok\n"),
    (b"said ", KNOWN.encode(), b" twice\n"),
    (b"mysql -u root -p", b"Pw77QzMq1", b" db\n"),
    (b"password: ", b"yaml value with blanks", b"\n"),
    (b"ssh https://deploy:", b"urlPw-Q2x7", b"@host/repo\n"),
    (b"-----BEGIN RSA PRIVATE KEY-----\nMIIEow", b"IBAAKCAQEA1pemBody\nsecondLineOfTheKey", b"\n"),
]


@pytest.mark.parametrize(
    "before,secret,after", SPLIT, ids=lambda v: v[:12].decode(errors="replace")
)
@pytest.mark.parametrize("where", [0.3, 0.5, 0.7], ids=["early", "middle", "late"])
def test_a_secret_printed_in_pieces_seconds_apart_is_redacted_whole(
    clock: Clock, before: bytes, secret: bytes, after: bytes, where: float
) -> None:
    at = max(1, int(len(secret) * where))
    tail = b"-----END RSA PRIVATE KEY-----\n" if before.startswith(b"-----BEGIN") else b""
    pieces = [
        (b"a line first\n", 0.3),
        (before, 2.0),
        (secret[:at], 2.0),
        (secret[at:], 1.5),
        (after + tail, 0.5),
    ]
    chunks, redactor = record(clock, pieces)
    whole = b"".join(p for p, _ in pieces)
    out = stored(chunks)
    assert secret not in out and secret[:at] not in out.split(b"\n", 1)[1]
    assert out == redactor.bytes(whole, "stdout")[0]  # as if redacted in one piece
    ends = [c.end for c in chunks]
    assert ends == sorted(ends) and ends[-1] == len(whole)  # byte offsets in the raw stream
    assert [c.size for c in chunks] == [len(decode(c)) for c in chunks]


def test_ordinary_output_is_stored_as_promptly_as_before(clock: Clock) -> None:
    redactor = Redactor.for_run([], {}, {})
    chunks: list[OutputChunk] = []
    rec = OutputRecorder(chunks.extend, "run", "here", redactor)
    rec.feed("stdout", b"Collecting numpy\n")
    clock.now += FLUSH_S
    rec.tick()
    assert stored(chunks) == b"Collecting numpy\n"  # a whole line: within FLUSH_S
    rec.feed("stdout", b"Downloading 45% of numpy-2.4.2")
    clock.now += PARTIAL_HOLD_S
    rec.tick()
    # an unfinished line: after PARTIAL_HOLD_S, all but its last word (which may still grow)
    assert stored(chunks) == b"Collecting numpy\nDownloading 45% of "
    rec.feed("stdout", b".tar.gz\n")
    clock.now += FLUSH_S
    rec.tick()
    assert stored(chunks) == b"Collecting numpy\nDownloading 45% of numpy-2.4.2.tar.gz\n"


def test_a_held_tail_is_stored_when_the_run_ends(clock: Clock) -> None:
    chunks, _ = record(clock, [(b"ok\nEnter the password for bob: ", 5.0)])
    assert stored(chunks) == b"ok\nEnter the password for bob: "
    assert stored(chunks[:-1]) == b"ok\nEnter the "  # held from the trigger word until the end


def test_a_long_line_is_never_cut_inside_a_secret(clock: Clock) -> None:
    """A 600 KiB line without a blank, secrets put around every place it may be cut."""
    jwt = b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36"
    secrets = [  # (as printed, the secret in it)
        (b"hf_" + b"H" * 34, b"H" * 34),
        (b'"password":"pw-json-Zx9Wq"', b"pw-json-Zx9Wq"),
        (jwt, jwt[20:]),
        (KNOWN.replace(" ", "-").encode(), KNOWN.replace(" ", "-").encode()),
        (b"https://bob:urlPw-Secret1@example.com/x", b"urlPw-Secret1"),
    ]
    redactor = Redactor.for_run([KNOWN.replace(" ", "-")], {}, {})
    for shift in range(-60, 61, 4):
        line = bytearray(b"x" * 600 * 1024)
        for i, (secret, _) in enumerate(secrets):
            # around the cut of the first chunk (MAX_CHUNK less the slack) and of the next ones
            at = MAX_CHUNK - recorder.LONG_LINE_SLACK + shift + 200 * i
            at = at + MAX_CHUNK * (i % 2)
            line[at - 1 : at + len(secret) + 1] = b"," + secret + b","
        data = bytes(line) + b"\n"
        chunks: list[OutputChunk] = []
        rec = OutputRecorder(chunks.extend, "run", "here", redactor)
        for start in range(0, len(data), 256 * 1024):  # as the spool is read
            rec.feed("stdout", data[start : start + 256 * 1024])
        rec.close()
        out = stored(chunks)
        for _, secret in secrets:
            assert secret not in out, (shift, secret)
        assert out == redactor.bytes(data, "stdout")[0]
        assert len(chunks) >= 3 and all(c.size < 2 * MAX_CHUNK for c in chunks)
        assert chunks[-1].end == len(data)
