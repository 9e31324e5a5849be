"""Facts a run's output shows about the host's stack, read the way a person reads them.

A check prints several values on one line (``print(torch.__version__, torch.version.cuda,
torch.cuda.nccl.version())`` gives ``2.10.0+cu128 12.8 (2, 22, 3)``): the values are mapped
to the expressions of the ``python -c`` code (or the ``>>>`` statement) that printed them, so
each is known by what it is, whatever the order, separator or f-string around it. Tools print
their own facts: `nvidia-smi`'s banner (the driver and the CUDA it supports), `nvcc --version`
(the toolkit), `python -m torch.utils.collect_env` (torch's build CUDA, the runtime toolkit,
the driver, the GPUs), labelled checks (``torch: 2.10.0+cu128``, ``CUDA: 12.8``).

:func:`facts` reads one run; :func:`host_facts` folds them over a subject's runs per host, so
that detectors compare facts printed by different commands as they compare a probe's values.
A run that changed torch forgets what was printed of the torch before it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from journal.reading.commands import shell_pieces
from journal.reading.installs import output_changes
from journal.reading.subject import Evidence, Run, Subject

#: The expressions a check prints, by what they are: (fact, the regex of the printed value).
TUPLE = r"\(\s*\d+(?:\s*,\s*\d+)*\s*,?\s*\)"
EXPRESSIONS: dict[str, tuple[str, str]] = {
    "torch.__version__": ("torch.version", r"\S+"),
    "torch.version.__version__": ("torch.version", r"\S+"),
    "torch.version.cuda": ("torch.cuda", r"\S+"),
    "torch.version.hip": ("torch.hip", r"\S+"),
    "torch.cuda.nccl.version()": ("torch.nccl", rf"{TUPLE}|\d+"),
    "torch.cuda.is_available()": ("cuda.available", r"True|False"),
    "torch.cuda.device_count()": ("gpu.count", r"\d+"),
    "torch.cuda.get_device_name()": ("gpu.name", r".+?"),
    "torch.cuda.get_device_capability()": ("gpu.capability", TUPLE),
    "torch.backends.cudnn.version()": ("cudnn", r"\d+|None"),
    "numpy.__version__": ("numpy.version", r"\S+"),
}
#: A printed value of an expression not known here: a tuple, a list, a quoted string, a word.
ANY_VALUE = r"\([^()\n]*\)|\[[^\[\]\n]*\]|'[^'\n]*'|\"[^\"\n]*\"|\S+"

#: How far into a run's output a ``python -c`` check's prints are looked for.
SCAN_LINES = 400

#: Labelled lines: collect_env's, nvcc's, and the labels people give their checks.
LABELLED: tuple[tuple[str, re.Pattern[str], str | None], ...] = tuple(
    (fact, re.compile(pattern, re.M), needle)
    for fact, pattern, needle in (
        ("torch.version", r"^PyTorch version[ \t]*: (?P<v>\S+)[ \t]*$", "PyTorch version:"),
        (
            "torch.cuda",
            r"^CUDA used to build PyTorch[ \t]*: (?P<v>[\d.]+|None|Could not collect)[ \t]*$",
            "CUDA used",
        ),
        (
            "cuda.available",
            r"^Is CUDA available[ \t]*: (?P<v>True|False|Yes|No)[ \t]*$",
            "Is CUDA available",
        ),
        ("runtime.cuda", r"^CUDA runtime version[ \t]*: (?P<v>\d+\.\d+)\S*[ \t]*$", "CUDA runtime"),
        (
            "driver.version",
            r"^Nvidia driver version[ \t]*: (?P<v>\d+\.\d+(?:\.\d+)?)[ \t]*$",
            "Nvidia",
        ),
        (
            "gpu.models",
            r"^GPU models and configuration[ \t]*: ?(?P<v>[^\n]*)$",
            "GPU models and configuration",
        ),
        (
            "torch.build",
            r"^\[conda\][ \t]+pytorch[ \t]+(?P<v>\d\S*[ \t]+\S+)",
            "[conda] pytorch",
        ),
        ("torch.version", r"^\[pip3?\][ \t]+torch==(?P<v>\S+)[ \t]*$", "] torch=="),
        ("nvcc.release", r"^Cuda compilation tools, release (?P<v>\d+\.\d+)", "compilation tools"),
        (
            "torch.version",
            r"^[ \t]*(?:torch|pytorch|torch version|torch\.__version__)[ \t]*[:=][ \t]*"
            r"(?P<v>\d+\.\d+\S*)[ \t]*$",
            None,
        ),
        (
            "torch.cuda",
            r"^[ \t]*(?:CUDA|cuda|torch\.version\.cuda|torch cuda)[ \t]*[:=][ \t]*"
            r"(?P<v>\d+\.\d+|None)[ \t]*$",
            None,
        ),
        (
            "cuda.available",
            r"^[ \t]*(?:CUDA available|cuda available|torch\.cuda\.is_available\(\))"
            r"[ \t]*[:=][ \t]*(?P<v>True|False)[ \t]*$",
            "vailable",
        ),
    )
)
#: `conda list`'s torch: `pytorch   1.11.0   py3.8_cpu_0   pytorch`.
CONDA_LIST = re.compile(r"^pytorch[ \t]+(?P<v>\d\S*[ \t]+\S+)", re.M)
#: `nvidia-smi`'s banner: the driver, and the newest CUDA it supports.
SMI_BANNER = re.compile(
    r"Driver Version:\s*(?P<driver>[\d.]+)\s+CUDA Version:\s*(?P<cuda>\d+\.\d+)"
)
#: No NVIDIA GPU on this host, as a shell or nvidia-smi says it.
NO_GPU = re.compile(
    r"nvidia-smi: (?:command )?not found|No devices were found|"
    r"nvidia-smi: No such file or directory|nvidia-smi'? is not recognized",
)
#: collect_env's GPU models where it saw none.
NO_MODELS = ("", "No CUDA", "Could not collect")
_ALIAS = re.compile(r"^\s*(?:import|from)\b")


@dataclass(frozen=True)
class Fact:
    """One thing the output says (``name``: ``torch.cuda``, ``driver.cuda`` …), its value as
    printed (``None`` for Python's ``None``), the line that shows it and its position."""

    name: str
    value: Any
    evidence: Evidence
    pos: int


def _value(text: str) -> Any:
    """A printed value as Python would read it (a tuple, a number, True, None), else the text;
    a string's repr (``'13.0'``, as ``>>>`` echoes it) without its quotes."""
    text = text.strip()
    if text[:1] in "(['\"" or text.isdigit() or text in ("True", "False", "None"):
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text
    return text


# -- python -c and >>> statements ----------------------------------------------------------


def python_code(command: str) -> list[str]:
    """The code of each ``python -c CODE`` in a shell command."""
    if "-c" not in command or "python" not in command:
        return []
    found = []
    for words in shell_pieces(command):
        for i, word in enumerate(words):
            if re.fullmatch(r"(?:.*/)?python(?:\d(?:\.\d+)?)?", word):
                rest = words[i + 1 :]
                for j, arg in enumerate(rest):
                    if arg == "-c" and j + 1 < len(rest):
                        found.append(rest[j + 1])
                        break
                    if not arg.startswith("-"):
                        break
                break
    return found


def _aliases(tree: ast.AST, into: dict[str, str]) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for name in node.names:
                if name.asname:
                    into[name.asname] = name.name


def _canonical(expr: ast.expr, aliases: dict[str, str]) -> str:
    """The expression's text with module aliases undone and call arguments dropped
    (``t.cuda.get_device_name(0)`` → ``torch.cuda.get_device_name()``)."""
    node = expr
    called = False
    if isinstance(node, ast.Call) and not node.keywords:
        node, called = node.func, True
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - an odd tree is no fact
        return ""
    head, dot, tail = text.partition(".")
    if head in aliases:
        text = aliases[head] + dot + tail
    return text + ("()" if called else "")


@dataclass(frozen=True)
class Printed:
    """What one print call writes: a regex of its line, and the fact each group holds."""

    pattern: re.Pattern[str]
    names: tuple[str | None, ...]


def _print_of(call: ast.Call, aliases: dict[str, str]) -> Printed | None:
    sep = " "
    for keyword in call.keywords:
        if keyword.arg == "sep" and isinstance(keyword.value, ast.Constant):
            sep = str(keyword.value.value)
        elif keyword.arg == "end":
            end = keyword.value
            if not (isinstance(end, ast.Constant) and str(end.value).endswith("\n")):
                return None  # the next print goes on the same line
        elif keyword.arg != "file":
            return None
    parts: list[str] = []
    names: list[str | None] = []

    def value(expr: ast.expr) -> str:
        known = EXPRESSIONS.get(_canonical(expr, aliases))
        names.append(known[0] if known else None)
        return f"({known[1] if known else ANY_VALUE})"

    for arg in call.args:
        if isinstance(arg, ast.Starred):
            return None
        if isinstance(arg, ast.Constant):
            parts.append(re.escape(str(arg.value)))
        elif isinstance(arg, ast.JoinedStr):
            piece = []
            for part in arg.values:
                if isinstance(part, ast.Constant):
                    piece.append(re.escape(str(part.value)))
                elif isinstance(part, ast.FormattedValue):
                    if part.format_spec is not None or part.conversion not in (-1, 115):
                        piece.append(f"({ANY_VALUE})")
                        names.append(None)
                    else:
                        piece.append(value(part.value))
            parts.append("".join(piece))
        else:
            parts.append(value(arg))
    if not any(names):
        return None
    try:
        pattern = re.compile("^[ \t]*" + re.escape(sep).join(parts) + "[ \t]*$")
    except re.error:
        return None
    return Printed(pattern, tuple(names))


def _prints(code: str, aliases: dict[str, str]) -> list[Printed]:
    """The print calls of ``code`` that print a known fact, in the order they appear."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    _aliases(tree, aliases)
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
    ]
    calls.sort(key=lambda c: (c.lineno, c.col_offset))
    return [p for p in (_print_of(c, aliases) for c in calls) if p is not None]


def _lines(run: Run, start: int = 0, limit: int = SCAN_LINES) -> Iterator[tuple[int, str]]:
    """(position, line) of the run's output from ``start``, at most ``limit`` lines."""
    text = run.text
    pos = start
    for _ in range(limit):
        if pos >= len(text):
            return
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        yield pos, text[pos:end]
        pos = end + 1


def _match_prints(run: Run, prints: list[Printed], lines: list[tuple[int, str]]) -> list[Fact]:
    """Each print matched to the first line after the previous print's that has its shape."""
    found: list[Fact] = []
    at = 0
    for printed in prints:
        for index in range(at, len(lines)):
            pos, line = lines[index]
            match = printed.pattern.match(line.rstrip())
            if not match:
                continue
            for group, name in enumerate(printed.names, 1):
                if name is not None:
                    found.append(
                        Fact(
                            name,
                            _value(match.group(group)),
                            run.line_at(pos),
                            match.start(group) + pos,
                        )
                    )
            at = index + 1
            break
    return found


def _repl(run: Run) -> list[Fact]:
    """Facts from a Python session pasted with its ``>>>`` prompts: an expression's echoed
    value on the line after it, a print's values mapped as a ``python -c`` check's."""
    found: list[Fact] = []
    aliases: dict[str, str] = {}
    text = run.text
    pos = text.find(">>> ")
    seen = 0
    while pos >= 0 and seen < 200:
        seen += 1
        if pos and text[pos - 1] != "\n":
            pos = text.find(">>> ", pos + 4)
            continue
        end = text.find("\n", pos)
        if end < 0:
            break
        statement = text[pos + 4 : end].strip()
        following = list(_lines(run, end + 1, 20))
        answer = []
        for line_pos, line in following:
            if line.startswith((">>>", "...")):
                break
            answer.append((line_pos, line))
        if _ALIAS.match(statement):
            try:
                _aliases(ast.parse(statement), aliases)
            except (SyntaxError, ValueError):
                pass
        elif statement.startswith("print("):
            found += _match_prints(run, _prints(statement, aliases), answer)
        elif answer:
            try:
                tree = ast.parse(statement, mode="eval")
            except (SyntaxError, ValueError):
                tree = None
            known = EXPRESSIONS.get(_canonical(tree.body, aliases)) if tree else None
            line_pos, line = answer[0]
            shown = line.strip()
            if shown[:1] in "'\"" and shown[-1:] == shown[:1]:
                shown = shown[1:-1]  # the repr of a string
            if known and re.fullmatch(known[1], shown):
                found.append(Fact(known[0], _value(line), run.line_at(line_pos), line_pos))
        pos = text.find(">>> ", end)
    return found


# -- one run, then a host ---------------------------------------------------------------------


def facts(run: Run) -> list[Fact]:
    """What ``run``'s output shows of the stack, in order of position (remembered)."""
    if run._facts is not None:
        return run._facts
    found: list[Fact] = []
    aliases: dict[str, str] = {}
    codes = python_code(run.command)
    if codes:
        lines = list(_lines(run))
        for code in codes:
            found += _match_prints(run, _prints(code, aliases), lines)
    if run.has(">>> "):
        found += _repl(run)
    for name, pattern, needle in LABELLED:
        if needle is not None and not run.has(needle):
            continue
        if needle is None and not codes:
            continue  # a bare `CUDA: 12.8` label is a check's only in a python run
        for match, line in run.grep(pattern, limit=4):
            value = _value(match.group("v"))
            if value in ("Could not collect", "No"):
                value = None if name == "torch.cuda" else False  # collect_env's words for them
            elif value == "Yes":
                value = True
            found.append(Fact(name, value, line, match.start("v")))
    if re.search(r"\b(?:conda|mamba|micromamba) list\b", run.command):
        for match, line in run.grep(CONDA_LIST, "pytorch", limit=2):
            found.append(Fact("torch.build", match.group("v"), line, match.start("v")))
    for match, line in run.grep(SMI_BANNER, "CUDA Version", limit=1):
        found.append(Fact("driver.version", match.group("driver"), line, match.start()))
        found.append(Fact("driver.cuda", match.group("cuda"), line, match.start("cuda")))
    for match, line in run.grep(NO_GPU, "nvidia-smi", "No devices were found", limit=1):
        found.append(Fact("gpu.none", line.text.strip(), line, match.start()))
    found = _dedupe(found)
    run._facts = found
    return found


def _dedupe(found: list[Fact]) -> list[Fact]:
    out: dict[tuple[str, int], Fact] = {}
    for fact in sorted(found, key=lambda f: f.pos):
        out.setdefault((fact.name, fact.evidence.line or 0), fact)
    return list(out.values())


TORCH_FACTS = ("torch.version", "torch.cuda", "torch.nccl", "cuda.available", "torch.build")


@dataclass
class HostFacts:
    """The facts known of a host as of one run: the latest of each name, and the names this
    run itself showed."""

    known: dict[str, Fact]
    shown: frozenset[str]

    def get(self, name: str) -> Fact | None:
        return self.known.get(name)

    def value(self, name: str) -> Any:
        fact = self.known.get(name)
        return fact.value if fact else None


def host_facts(subject: Subject) -> dict[int, HostFacts]:
    """For each run (by ``id``) that showed a fact, the facts of its host as of that run;
    computed once per subject."""
    if subject._printed is not None:
        return subject._printed
    state: dict[str, dict[str, Fact]] = {}
    out: dict[int, HostFacts] = {}
    for run in subject.runs:
        known = state.setdefault(run.host, {})
        if "torch" in run.command and "install" in run.command or run.has("torch==", " torch-"):
            changed = run.diff.changes if run.diff is not None else output_changes(run)
            if any(getattr(c, "key", "") == "torch" for c in changed):
                for name in TORCH_FACTS:
                    known.pop(name, None)  # what was printed of the old torch is history
        found = facts(run)
        if not found:
            continue
        for fact in found:
            known[fact.name] = fact
        out[id(run)] = HostFacts(dict(known), frozenset(f.name for f in found))
    subject._printed = out
    return out


def at(subject: Subject, run: Run) -> HostFacts | None:
    """The facts of ``run``'s host as of ``run``, when ``run`` showed any."""
    return host_facts(subject).get(id(run))


def no_gpu(subject: Subject, run: Run) -> Evidence | None:
    """What shows that ``run``'s host has no NVIDIA GPU in sight: `nvidia-smi` missing or
    finding no device, or collect_env with CUDA unavailable and no GPU model; None otherwise."""
    for other in subject.runs:
        if other.host != run.host:
            continue
        for fact in facts(other):
            if fact.name == "gpu.none":
                return fact.evidence
            if fact.name == "gpu.models" and str(fact.value).strip() in (
                "",
                "No CUDA",
                "Could not collect",
            ):
                available = next((f for f in facts(other) if f.name == "cuda.available"), None)
                if available is not None and available.value is False:
                    return available.evidence
    return None
