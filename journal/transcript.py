"""Terminal transcripts as people paste them: prompt lines, each followed by its output.

Prompts recognised, as families (:data:`PROMPTS`), each with an optional ``(venv)`` before it:
bash's ``user@host:~/dir$ cmd``, ``user@host:~# cmd`` and ``[user@host dir]$ cmd``; macOS zsh's
``user@host dir % cmd``; fish's ``user@host ~/dir> cmd``; Windows cmd's ``C:\\path>cmd``;
PowerShell's ``PS C:\\path> cmd``; ``~/dir$ cmd`` and ``$ cmd``. Shapes that output also
prints are prompts only where what follows reads as a command (a known program, a path,
``VAR=value``): a bare ``# cmd`` (otherwise a comment), ``% cmd`` and zsh's ``host% cmd``,
fish's ``~/dir> cmd``, oh-my-zsh's ``➜  dir cmd``, starship's ``❯ cmd``. ``>>> `` (Python) is
never a prompt; nor is a line that only ends in ``>`` or ``%`` (``-> x``, ``<tag>``,
``100%``), nor a Windows path followed by other text.

Times, where the transcript has them (see :data:`STAMP`): a prompt that starts with the time
(bash ``PS1='[\\t] …'`` gives ``[12:01:33] user@host:~$ cmd``, ``\\D{%F %T}`` gives
``[2026-12-01 12:01:33] …``, zsh ``%*`` gives ``12:01:33 …``), and `ts` (moreutils) stamps on
every line (``Dec 01 12:01:33 …`` by default, ``2026-12-01 12:01:33 …`` with ``ts '%F %T'``).
A `script` log's ``Script started on 2026-12-01 12:00:00…`` header dates a session whose
prompts carry only the time of day, and its ``Script done on …`` line ends the last command.
A command starts at its prompt's time and lasts until the next prompt's (or, for the last
one, its last stamped output line or the ``Script done`` time); without them it is untimed.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

_ENV = r"(?:\([^)\n]{1,80}\)\s*)?"  # (venv), (base), (env)
_WHO = r"(?P<user>[\w.-]{1,64})@(?P<host>[\w.-]{1,128})"  # user@host
#: A Windows path as cmd and PowerShell print it: a drive, then names without : * ? " < > |.
_WINDOWS = r"[A-Za-z]:\\(?:[^\\/:*?\"<>|\n]{0,255}\\){0,64}[^\\/:*?\"<>|\n]{0,255}"


@dataclass(frozen=True)
class PromptFamily:
    """One shell's prompt shape. ``pattern`` matches a whole prompt line, its ``cmd`` group the
    command (``user`` and ``host`` where the prompt names them). ``command_only``: the shape is
    also common in output (``% Total``, ``/usr/lib> ``, ``➜  Local: http://…``), so only a line
    where what follows reads as a command (see :func:`_is_command`) is a prompt. ``marks``:
    strings one of which every line of the family holds, tested before the pattern (most output
    lines hold none, and each line of a pasted session is asked)."""

    name: str
    pattern: re.Pattern[str]
    command_only: bool = False
    example: str = ""
    marks: tuple[str, ...] = ()


#: The prompt families, tried in order (the first that matches wins). Each is anchored at the
#: start of the line, and every repetition is bounded, so no line makes them backtrack far.
PROMPTS = (
    # macOS zsh's default `%n@%m %1~ %# `: the directory is one word, then ` % `.
    PromptFamily(
        "zsh",
        re.compile("^" + _ENV + _WHO + r" [^\s%]{1,200} %(?: (?P<cmd>.*))?$"),
        example="user@MacBook-Pro ~ % pip install torch",
        marks=(" %",),
    ),
    # fish's default `user@host ~/dir> `, ` [1]> ` after a failure (`[0|1]`: a pipeline's);
    # `# ` as root is the bash shape below.
    PromptFamily(
        "fish",
        re.compile(
            "^" + _ENV + _WHO + r" [~/][^\s>]{0,300}(?: \[\d{1,3}(?:\|\d{1,3}){0,16}\])?>"
            r"(?: (?P<cmd>.*))?$"
        ),
        example="user@host ~/src [1]> pip install torch",
        marks=(">",),
    ),
    # bash and most PS1s: `user@host:~/dir$ `, `root@host:/# `, `user@host ~$ `.
    PromptFamily(
        "bash",
        re.compile("^" + _ENV + _WHO + r"[:\s][^\n$#]{0,300}?\s?[$#] (?P<cmd>.*)$"),
        example="user@host:~/dir$ pip install torch",
        marks=("$ ", "# "),
    ),
    # bash's `\w\$ ` alone: `~/src$ `, `/workspace$ `.
    PromptFamily(
        "bash-dir",
        re.compile("^" + _ENV + r"[~/][^\s$#>]{0,300}\$ (?P<cmd>\S.*)$"),
        example="~/src$ pip install torch",
        marks=("$ ",),
    ),
    # Red Hat's `[user@host dir]$ `.
    PromptFamily(
        "bash-brackets",
        re.compile(
            "^" + _ENV + r"\[(?P<user>[\w.-]{1,64})@(?P<host>[\w.-]{1,128})[^\]\n]{0,200}\]"
            r"\s?[$#] (?P<cmd>.*)$"
        ),
        example="[user@host dir]$ pip install torch",
        marks=("$ ", "# "),
    ),
    # PowerShell's `PS C:\path> ` (and pwsh's `PS /home/user> `).
    PromptFamily(
        "powershell",
        re.compile("^" + _ENV + r"PS (?:" + _WINDOWS + r"|[~/][^<>|\n]{0,300})>(?: (?P<cmd>.*))?$"),
        example=r"(env) PS C:\Users\me> pip install torch",
        marks=("PS ",),
    ),
    # Windows cmd's `C:\path>` (`$P$G`: no space before the command).
    PromptFamily(
        "cmd",
        re.compile("^" + _ENV + _WINDOWS + r">(?P<cmd>.*)$"),
        example=r"(base) C:\Users\me>pip install torch",
        marks=(":\\",),
    ),
    # oh-my-zsh's robbyrussell theme: `➜  dir git:(main) ✗ ` (no mark ends it).
    PromptFamily(
        "oh-my-zsh",
        re.compile(
            "^" + _ENV + r"➜ {1,2}\S{1,200}(?: git:\([^)\n]{1,100}\))?(?: ✗)? (?P<cmd>\S.*)$"
        ),
        command_only=True,
        example="➜  ~ pip install torch",
        marks=("➜",),
    ),
    # zsh's own default `%m%# ` (`host% `) and the bare `% ` of csh and documentation.
    PromptFamily(
        "zsh-host",
        re.compile("^" + _ENV + r"(?P<host>[A-Za-z][\w.-]{0,127})?% (?P<cmd>\S.*)$"),
        command_only=True,
        example="gpu-box% pip install torch",
        marks=("% ",),
    ),
    # fish without user@host: `~> `, `~/src> `.
    PromptFamily(
        "fish-bare",
        re.compile("^" + _ENV + r"[~/][^\s>]{0,300}> (?P<cmd>\S.*)$"),
        command_only=True,
        example="~/src> pip install torch",
        marks=("> ",),
    ),
    # starship's and pure's `❯ ` (under a two-line prompt, oh-my-posh's `╰─❯ `).
    PromptFamily(
        "arrow",
        re.compile("^" + r"(?:[╰└]─{1,3} ?)?" + _ENV + r"❯ (?P<cmd>\S.*)$"),
        command_only=True,
        example="╰─❯ pip install torch",
        marks=("❯",),
    ),
    # `$ ` and, where a command follows, `# `.
    PromptFamily(
        "bare",
        re.compile("^" + _ENV + r"(?P<mark>[$#]) (?P<cmd>\S.*)$"),
        example="$ pip install torch",
        marks=("$ ", "# "),
    ),
)

#: First words that make a ``# …`` line a command rather than a comment.
COMMANDS = frozenset(
    """
    uv pip pip3 python python3 conda mamba micromamba source export unset cd ls cat echo printf
    nvidia-smi nvcc sudo apt apt-get dpkg git curl wget make cmake ninja docker podman ssh scp
    rsync rm cp mv mkdir ln tail head grep env which ldd ldconfig readelf pkill kill ps top htop
    torchrun sglang vllm huggingface-cli hf bash sh zsh time timeout systemctl journalctl
    tar unzip chmod chown find du df free watch tee sed awk sort uniq wc diff patch nohup
    accelerate deepspeed mpirun srun sbatch all_reduce_perf all_gather_perf llama-bench
    """.split()
)


@dataclass
class Command:
    """A command of a transcript with its output lines and where they are in the file."""

    index: int
    command: str
    line: int  # the prompt's line number (1-based)
    user: str | None = None
    host: str | None = None
    output: list[str] = field(default_factory=list)
    raw: str = ""  # the prompt line as pasted
    at: str | None = None  # the prompt's time as the transcript printed it
    clock: float | None = None  # seconds since the transcript's first time (or its day)
    duration: float | None = None  # until the next prompt's time, when both are known
    day: str | None = None  # the date its time is of: ``2026-12-01``, ``--12-01`` (no year)

    def moment(self, now: datetime) -> datetime | None:
        """When the command started, when its transcript dates it (a dated stamp, or a
        `script` log's date; a year-less ``Dec 01`` is of ``now``'s year, the year before if
        that is after ``now``); None for a time of day alone or no time. A transcript's times
        are of the zone of ``now`` (aware: the importing machine's own)."""
        if self.clock is None or not self.day:
            return None
        naive = datetime(2000, 1, 1) + timedelta(seconds=self.clock)
        local = now.replace(tzinfo=None)
        if self.day.startswith("--"):
            try:
                naive = naive.replace(year=local.year)
                if naive > local:
                    naive = naive.replace(year=local.year - 1)
            except ValueError:  # 29 February of a year that has none
                return None
        return naive.replace(tzinfo=now.tzinfo)

    @property
    def first_output_line(self) -> int:
        return self.line + 1


def _is_command(text: str) -> bool:
    first = text.split(maxsplit=1)[0] if text.split() else ""
    if not first:
        return False
    if "=" in first and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", first):
        return True  # CUDA_VISIBLE_DEVICES=0 python ...
    return first in COMMANDS or first.startswith(("/", "./", "~/", "../")) or first.endswith(".sh")


#: Any family's mark: most output lines hold none, and are no prompt after one search.
_ANY_MARK = re.compile(
    "|".join(
        re.escape(m) for m in dict.fromkeys(mark for family in PROMPTS for mark in family.marks)
    )
)


def prompt(line: str) -> tuple[str, str | None, str | None] | None:
    """(command, user, host) if ``line`` is a prompt line of one of :data:`PROMPTS`, else
    None. ``>>> `` (Python) is never a prompt; a bare ``# `` only before a command."""
    if len(line) > 4000 or line.startswith(">>>") or not _ANY_MARK.search(line):
        return None
    for family in PROMPTS:
        for mark in family.marks:
            if mark in line:
                break
        else:
            continue
        match = family.pattern.match(line)
        if match is None:
            continue
        cmd = (match.group("cmd") or "").strip()
        groups = match.groupdict()
        if (family.command_only or groups.get("mark") == "#") and not _is_command(cmd):
            continue
        return cmd, groups.get("user"), groups.get("host")
    return None


_MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()

#: A time at the start of a line: ``[12:01:33] ``, ``12:01:33 ``, ``[2026-12-01 12:01:33] ``,
#: ``2026-12-01T12:01:33 ``, ``Dec 01 12:01:33 `` (fractions of a second allowed).
STAMP = re.compile(
    r"^(?P<open>\[)?(?:(?P<date>\d{4}-\d{2}-\d{2})[ T]|(?P<mon>"
    + "|".join(_MONTHS)
    + r") {1,2}(?P<day>\d{1,2}) )?(?P<time>(?:[01]?\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,6})?)"
    r"(?(open)\]) "
)
_SCRIPT = re.compile(
    r"^Script (?P<what>started|done) on (?P<date>\d{4}-\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2})"
)


def _seconds(match: re.Match[str]) -> tuple[str, float, str | None]:
    """(as printed, seconds into its day, its date when it has one) of a stamp."""
    h, m, s = match.group("time").split(":")
    seconds = int(h) * 3600 + int(m) * 60 + float(s)
    date = match.group("date")
    if date is None and match.groupdict().get("mon"):
        month = _MONTHS.index(match.group("mon")) + 1
        date = f"--{month:02d}-{int(match.group('day')):02d}"  # no year: ordered in the year
    shown = match.group(0).strip().strip("[]")
    return shown, seconds, date


def _day(date: str | None) -> float:
    """Seconds to the start of ``date`` from a fixed origin (0 without a date)."""
    if not date:
        return 0.0
    if date.startswith("--"):
        month, day = (int(x) for x in date[2:].split("-"))
        date = f"2000-{month:02d}-{day:02d}"
    try:
        return (datetime.fromisoformat(date) - datetime(2000, 1, 1)).total_seconds()
    except ValueError:
        return 0.0


def lines_of(text: str) -> list[str]:
    """A transcript's lines as :func:`commands` reads them (a ``\r`` before each newline
    dropped)."""
    return [raw.rstrip("\r") for raw in text.split("\n")]


class TranscriptFile:
    """A transcript file's lines as :func:`lines_of` gives them, read from the file again each
    time it is iterated (bad bytes replaced), one line at a time: a 200 MB session is never
    held whole."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[str]:
        with self.path.open("rb") as file:
            for raw in file:
                yield raw.decode("utf-8", "replace").removesuffix("\n").rstrip("\r")


class Stamps:
    """Counts, line by line, whether `ts` stamped every line (:attr:`every`)."""

    def __init__(self) -> None:
        self.filled = self.stamped = 0

    def add(self, line: str) -> None:
        if line.strip():
            self.filled += 1
        if STAMP.match(line) is not None:
            self.stamped += 1

    @property
    def every(self) -> bool:
        """At least 80 % of the lines with text stamped, and more than one: then the stamp
        is stripped from output lines too."""
        return bool(self.filled) and self.stamped >= 0.8 * self.filled > 1


def stamped_throughout(lines: Iterable[str]) -> bool:
    """Whether `ts` stamped every line (:class:`Stamps`)."""
    stamps = Stamps()
    for line in lines:
        stamps.add(line)
    return stamps.every


def is_prompt_line(line: str) -> bool:
    """Whether :func:`commands` reads ``line`` (a stamp before it or not) as a prompt."""
    if _SCRIPT.match(line) is not None:
        return False
    stamp = STAMP.match(line)
    return prompt(line[stamp.end() :] if stamp is not None else line) is not None


class Output(Protocol):
    """Where a command's output lines go as they are read (a list, by default)."""

    def append(self, line: str, /) -> None: ...


def parse(text: str) -> list[Command]:
    """The commands of a transcript, in order; text before the first prompt is ignored. Each is
    timed from the transcript's own stamps where it has them (see the module's docstring)."""
    lines = lines_of(text)
    return list(commands(lines, stamped_throughout(lines)))


def commands(
    lines: Iterable[str], every: bool, output: Callable[[Command], Output] | None = None
) -> Iterator[Command]:
    """The commands of a transcript's ``lines`` (:func:`lines_of`), each given once its
    output has been read and its duration is known (when the next prompt is read, or at the
    end), so that a caller may write it before the next begins. ``every``: whether `ts`
    stamped every line (:func:`stamped_throughout`). Each command's output lines go to
    ``output(command)`` (default: the list ``command.output``) as they are read, without the
    blank lines before the next prompt."""
    session: str | None = None  # the `script` header's date
    last = None  # the previous time read, to carry over midnight
    offset = 0.0
    current: Command | None = None
    sink: Output | None = None
    end: float | None = None  # the last stamped output time of the current command
    blank: list[str] = []  # blank lines read since the last line with text

    def clock(seconds: float, date: str | None) -> float:
        nonlocal last, offset
        value = _day(date or session) + seconds + (offset if date is None else 0.0)
        if date is None and last is not None and value < last - 12 * 3600:
            offset += 86400.0  # a time-of-day stamp went past midnight
            value += 86400.0
        last = value
        return value

    index = 0
    for number, line in enumerate(lines, 1):
        script = _SCRIPT.match(line)
        if script is not None:
            if script.group("what") == "started":
                session = script.group("date")
            elif current is not None:
                h, m, s = (int(x) for x in script.group("time").split(":"))
                end = clock(h * 3600 + m * 60 + s, script.group("date"))
            continue
        stamp = STAMP.match(line)
        body = line[stamp.end() :] if stamp is not None else line
        found = prompt(body)
        if found is None and stamp is not None and not every:
            stamp, body = None, line  # a line of output that starts with a time
        if found is not None:
            cmd, user, host = found
            command = Command(index, cmd, number, user, host, raw=line)
            index += 1
            if stamp is not None:
                command.at, seconds, date = _seconds(stamp)
                command.clock = clock(seconds, date)
                command.day = date or session
            if current is not None:
                yield _timed(current, command.clock)
            current, end, blank = command, None, []
            sink = command.output if output is None else output(command)
        elif current is not None and sink is not None:
            if body.strip():
                for held in blank:
                    sink.append(held)
                blank.clear()
                sink.append(body)
            else:
                blank.append(body)
            if stamp is not None:
                _shown, seconds, date = _seconds(stamp)
                end = clock(seconds, date)
    if current is not None:
        yield _timed(current, end)


def _timed(command: Command, end: float | None) -> Command:
    """``command`` with its duration, until ``end`` (the next prompt's time, or for the last
    command its last stamped output or the `script` log's end) when both are known."""
    if command.clock is not None and end is not None and end >= command.clock:
        command.duration = end - command.clock
    return command


_PREFIXES = {"sudo", "time", "nohup", "env", "exec", "command"}
#: Installers' verbs after which the packages named make the step's name.
_VERBS = {"install", "uninstall", "add", "remove", "upgrade", "update", "sync", "create"}
#: Options that take a value (the next word), so that it is not taken for a package.
_VALUED = frozenset(
    """
    --python -p --index-url -i --extra-index-url --default-index --index -r --requirement -c
    --constraint --constraints -t --target --prefix -f --find-links -n --name --channel
    --upgrade-package -P --root --override --overrides -e --editable --python-version --extra
    """.split()
)
#: How long a name made from a command may be (cut at a word).
NAME_LIMIT = 60
_SHELL = re.compile(r"\s(?:\|\|?|&&|;|>>?|2>&1|<)\s|[;|]\s*$")
_PIN = re.compile(r"(?:\[[^\]]*\])?(?:[=<>!~;@ ].*)?$")


def _words(command: str) -> list[str]:
    command = _SHELL.split(command, maxsplit=1)[0]
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _clean(text: str) -> str:
    """``text`` as a step name: other characters made ``-``, runs of them one."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", text)
    return re.sub(r"-{2,}", "-", text).strip("-").lstrip("._")


def _bounded(parts: list[str]) -> str:
    name = ""
    for part in (p for p in (_clean(x) for x in parts) if p):
        joined = f"{name}-{part}" if name else part
        if len(joined) > NAME_LIMIT:
            return name or joined[:NAME_LIMIT].rstrip("-")
        name = joined
    return name


def _first_expression(code: str) -> str | None:
    """The first thing a ``python -c`` snippet prints (or evaluates): ``torch.__version__``."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id != "print":
                continue
            for arg in node.args:
                if isinstance(arg, ast.JoinedStr):
                    for part in arg.values:
                        if isinstance(part, ast.FormattedValue):
                            return ast.unparse(part.value)
                elif not isinstance(arg, ast.Constant):
                    return ast.unparse(arg)
    for node in tree.body:
        if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant):
            return ast.unparse(node.value)
    return None


def _packages(words: list[str]) -> list[str]:
    """The packages named among an installer's arguments (options and their values left out,
    versions and extras cut: ``torch==2.10.0`` is ``torch``)."""
    found: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = word in _VALUED
            continue
        name = _PIN.sub("", word.rsplit("/", 1)[-1] if "://" in word else word)
        if name and name not in found:
            found.append(name)
    return found


def step_name(command: str) -> str:
    """A short name for a command, a valid step name (letters, digits, ``.``, ``_``, ``-``;
    at most :data:`NAME_LIMIT`): ``uv-pip-install-torch``, ``pip-install-a-b``,
    ``python3-torch.__version__`` (what a ``python -c`` check prints first),
    ``python3-torch.utils.collect_env`` (``-m``), ``export-CUDA_HOME``, ``nvidia-smi``."""
    words = _words(command)
    while words and (words[0] in _PREFIXES or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])):
        words.pop(0)
    if not words:
        return "command"
    program = words[0].rsplit("/", 1)[-1]
    rest = words[1:]
    if program in ("export", "unset", "declare", "typeset"):
        names = [w.split("=", 1)[0] for w in rest if not w.startswith("-")]
        return _bounded([program, *names]) or "command"
    if re.fullmatch(r"python[\d.]*", program) and rest:
        if rest[0] == "-c" and len(rest) > 1:
            return _bounded([program, _first_expression(rest[1]) or "c"]) or "command"
        if rest[0] == "-m" and len(rest) > 1:
            if rest[1] == "pip":
                return step_name(" ".join(shlex.quote(w) for w in ["pip", *rest[2:]]))
            return _bounded([program, rest[1]]) or "command"
        if not rest[0].startswith("-"):
            return _bounded([program, rest[0].rsplit("/", 1)[-1]]) or "command"
    name = [program]
    # a message (echo, printf) is named by all of it, to the limit: three words of it read as
    # a phrase cut short (`echo-hello-from-the`); a command by its first words (git commit)
    said = rest if program in ("echo", "printf") else rest[:3]
    for index, word in enumerate(said):
        if not re.fullmatch(r"[a-z][a-z0-9_-]*", word):
            break
        name.append(word)
        if word in _VERBS:
            name += _packages(rest[index + 1 :])
            break
    return _bounded(name) or "command"
