"""What a terminal shows of a program's output: the text every reader of output judges.

Programs that think they write to a terminal (uv with ``--color always``, pip under
``FORCE_COLOR``, anything run through a pseudo-terminal) wrap words in SGR colour codes, set
the window title with OSC sequences, move the cursor, and redraw progress bars with ``\\r``;
logs saved on Windows end lines with ``\\r\\n``. :func:`clean` gives the text as the terminal
left it: escape sequences removed, each ``\\r`` redraw collapsed to the line's final text,
``\\r\\n`` read as ``\\n``, backspaces applied. It never adds or removes a newline, so line
``N`` of the clean text is line ``N`` of the original: evidence keeps pointing at the original
lines, while the stored bytes (and what the web page and exports show) stay as they were.

Hand-written rather than a library's: the libraries that strip ANSI codes (``strip-ansi``
ports, ``ansi2html``) neither collapse ``\\r`` redraws nor promise to keep the line count,
and this is three regular expressions.
"""

from __future__ import annotations

import re

#: CSI (``ESC [ … final``: colours, cursor moves, erase), OSC (``ESC ] … BEL`` or ``ESC \\``:
#: titles, hyperlinks; one left open ends at the line's end), DCS/SOS/PM/APC strings,
#: character-set choices (``ESC ( B``) and the other two-byte escapes (``ESC 7``, ``ESC =``);
#: the 8-bit CSI (``\\x9b``) too. None of them spans a newline.
ESCAPE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]"
    r"|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"
    r"|[PX^_][^\x1b\n]*(?:\x1b\\)?"
    r"|[()*+\-./][ -~]"
    r"|[ -/]*[0-~])?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
BACKSPACE = re.compile(r"[^\n\x08]\x08")


def needs_cleaning(text: str) -> bool:
    """Whether ``text`` holds anything :func:`clean` would change (a quick test)."""
    return "\x1b" in text or "\r" in text or "\x08" in text or "\x9b" in text


def clean(text: str) -> str:
    """``text`` as a terminal shows it; see the module's description. The same number of
    lines, each the final text of the original line."""
    if not needs_cleaning(text):
        return text
    if "\x1b" in text or "\x9b" in text:
        text = ESCAPE.sub("", text)
    if "\r" in text:
        text = _redraw(text)
    if "\x08" in text:
        while True:
            text, count = BACKSPACE.subn("", text)
            if not count:
                break
        text = text.replace("\x08", "")
    return text


def _redraw(text: str) -> str:
    """Each line holding a ``\r`` cut to what follows its last one (a ``\r`` that ends the
    line, as in ``\r\n``, redraws nothing); one pass, lines without one copied whole."""
    out: list[str] = []
    pos = 0
    while True:
        cr = text.find("\r", pos)
        if cr < 0:
            out.append(text[pos:])
            return "".join(out)
        newline = text.rfind("\n", pos, cr)
        start = newline + 1 if newline >= 0 else pos
        end = text.find("\n", cr)
        end = len(text) if end < 0 else end
        out.append(text[pos:start])
        out.append(text[start:end].rstrip("\r").rpartition("\r")[2])
        pos = end


def clean_chunks(chunks: list[str]) -> tuple[str, list[int]]:
    """The clean text of output that came in ``chunks`` (emptied as it is read, so that raw
    and clean copies of a big output are not held whole at once), and where each chunk starts
    in it: exactly for a chunk that starts a line, else the start of the line it continues
    (its line stays right; only its column is not kept). Cleaned a line-aligned block at a
    time, since no escape sequence or redraw spans a newline; one pass, whatever the sizes."""
    if not any(needs_cleaning(c) for c in chunks):
        starts, pos = [], 0
        for chunk in chunks:
            starts.append(pos)
            pos += len(chunk)
        text = "".join(chunks)
        chunks.clear()
        return text, starts
    out: list[str] = []
    starts = []
    size = 0  # clean characters of the complete lines so far
    pending: list[str] = []  # the raw pieces of a line not ended yet
    chunks.reverse()
    while chunks:
        chunk = chunks.pop()
        starts.append(size)
        cut = chunk.rfind("\n")
        if cut < 0:
            pending.append(chunk)
            continue
        done = clean("".join(pending) + chunk[: cut + 1])
        out.append(done)
        size += len(done)
        pending = [chunk[cut + 1 :]] if cut + 1 < len(chunk) else []
    if pending:
        out.append(clean("".join(pending)))
    return "".join(out), starts


#: What a terminal obeys instead of showing: the C0 controls but tab and newline, DEL, and the
#: C1 controls (``\x9b`` is an 8-bit CSI, ``\x9d`` an OSC).
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: The same in UTF-8 bytes, but for the colour (SGR) sequences, which group 1 keeps, and ``\r``.
CONTROL_BYTES = re.compile(rb"(\x1b\[[0-9;:]*m)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]")


def visible(text: str) -> str:
    """``text`` as it may be printed to a terminal: each control character (ESC, BEL, ``\\r``,
    the 8-bit CSI ...; tab and newline aside) written as its visible escape, ``\\x1b``,
    instead of being obeyed. Recorded host output is not trusted: an evidence line holding
    ``\\x1b]0;pwned\\x07`` would set the window title, ``\\x1b[2J`` clear the screen."""
    if not CONTROL.search(text):
        return text
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def visible_output(data: bytes) -> bytes:
    """A program's recorded output as it may be printed to a terminal: its colours (SGR
    sequences), tabs, newlines and ``\\r`` redraws kept, every other control character or
    escape sequence written as its visible escape, as :func:`visible` does."""

    def shown(match: re.Match[bytes]) -> bytes:
        if match.group(1):
            return match.group(1)
        code = match.group()[-1]
        return f"\\x{code:02x}".encode()

    return CONTROL_BYTES.sub(shown, data)
