"""What an install step named and what it changed, shared by the install detectors.

``named(command)`` reads which packages a command asked for by name: the requirements of
`pip install` / `uv pip install` (through :func:`journal.reading.commands.install_requests`),
wheel and sdist files, ``--upgrade-package`` / ``--reinstall-package`` values, ``#egg=``
fragments and the targets of `pip uninstall`; and whether a requirements or constraints file
may have named more.

``changes(run)`` says what a run changed. In a journal the package snapshots before and after
the step decide (certain); the output lines that show each change are added as evidence. In a
transcript (or a journal run without snapshots) the output must do: uv's `` - numpy==2.4.2`` /
`` + numpy==2.4.1`` lines, pip's ``Found existing installation: numpy 2.4.2`` and
``Successfully installed … numpy-2.4.1``, and a conda or mamba plan (read by
:mod:`journal.reading.conda`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import unquote

from journal.projections.packages import change_text, normalize
from journal.reading.commands import InstallRequest, install_requests, shell_words
from journal.reading.conda import conda_plan, conda_version
from journal.reading.subject import Evidence, Run, Subject
from journal.versions import parse_version

#: Options whose value is a file that may name (or pin) more packages than the command line.
FILE_OPTIONS = {
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "--constraints",
    "--override",
    "--overrides",
}
#: Options a title shows with the command (they change what an install does).
SHOWN_OPTIONS = ("--reinstall", "--force-reinstall", "-U", "--upgrade", "--no-deps")
#: Options whose value is a package name.
NAME_OPTIONS = {"--upgrade-package", "-P", "--reinstall-package", "--no-binary-package"}

_ARCHIVE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._]*)-\d[^/]*\.(?:whl|tar\.gz|zip|tar\.bz2)$")
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?(?:[=<>!~;@ ].*)?$")

#: Each pattern below matches a whole line (``line.match``); :func:`grep_lines` finds the
#: candidate lines with a pattern that starts with a literal, which the regex engine scans for
#: quickly (a ``^`` pattern in multiline mode is tried at every character of a 50 MB log).
UV_LINE = re.compile(r" ?([-+~]) ([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]\n]*\])?==([^\s(]+)")
UV_LINE_FAST = re.compile(r"\n ?[-+~] [A-Za-z0-9][^\n]*?==")
UV_SUMMARY = re.compile(r"(?:Installed|Uninstalled) \d+ packages? in ")
UV_SUMMARY_FAST = re.compile(r"nstalled \d+ packages? in ")
PIP_FOUND = re.compile(r"\s*Found existing installation: (\S+) (\S+)\s*$")
PIP_FOUND_FAST = re.compile(r"Found existing installation: ")
PIP_INSTALLED = re.compile(r"Successfully installed (.+)$")
PIP_INSTALLED_FAST = re.compile(r"Successfully installed ")
PIP_UNINSTALLED = re.compile(r"\s*Successfully uninstalled (\S+)\s*$")
PIP_UNINSTALLED_FAST = re.compile(r"Successfully uninstalled ")
PIP_ROLLBACK = re.compile(r"Rolling back uninstall of (\S+)")
def grep_lines(
    run: Run, fast: re.Pattern[str], line: re.Pattern[str], *needles: str, limit: int = 5000
) -> list[tuple[re.Match[str], Evidence]]:
    """The lines of ``run``'s output that ``line`` matches from their start, found through
    ``fast`` (a pattern every such line contains, led by a literal so that it scans quickly;
    a match may begin with the newline before the line). Each line is read once, however
    often ``fast`` occurs in it; ``needles`` skip the scan at once."""
    if needles and not run.has(*needles):
        return []
    text = run.text
    found: list[tuple[re.Match[str], Evidence]] = []
    first = run.line_at(0)
    head = line.match(first.text)
    if head:
        found.append((head, first))
    pos = text.find("\n") if head else 0
    while len(found) < limit and pos >= 0:
        hit = fast.search(text, pos)
        if hit is None:
            break
        at = hit.end() - 1 if hit.end() > hit.start() else hit.start()
        end = text.find("\n", at)
        pos = max(end, hit.start() + 1) if end >= 0 else -1
        evidence = run.line_at(at)
        match = line.match(evidence.text)
        if match:
            found.append((match, evidence))
    return found


@dataclass(frozen=True)
class Named:
    """The packages a command asked for by name (normalised), and the files that may name
    more (``-r requirements.txt``, ``-c constraints.txt``, ``--override``, ``uv pip sync``)."""

    names: frozenset[str] = frozenset()
    files: tuple[str, ...] = ()

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalize(name) in self.names


@lru_cache(maxsize=4096)
def requests(command: str) -> tuple[InstallRequest, ...]:
    """:func:`install_requests`, remembered: several detectors read each command."""
    return tuple(install_requests(command))


@lru_cache(maxsize=4096)
def named(command: str) -> Named:
    """What ``command`` asked for by name; see :class:`Named`."""
    names: set[str] = set()
    files: list[str] = []
    for req in requests(command):
        names |= req.names()
    words = shell_words(command)
    for i, word in enumerate(words):
        option, eq, value = word.partition("=")
        if option in FILE_OPTIONS or option in NAME_OPTIONS:
            value = value if eq else (words[i + 1] if i + 1 < len(words) else "")
            if option in FILE_OPTIONS:
                files.append(value)
            elif value:
                names.add(normalize(value))
            continue
        base = unquote(word.rsplit("/", 1)[-1])
        archive = _ARCHIVE.search(base)
        if archive:
            names.add(normalize(archive.group(1)))
        egg = _EGG.search(word)
        if egg:
            names.add(normalize(egg.group(1)))
        before = words[i - 1].rsplit("/", 1)[-1] if i else ""
        if word == "sync" and before == "uv":
            files.append("uv.lock")  # `uv sync`: the project's lock file names everything
        if word in ("uninstall", "sync") and re.fullmatch(r"pip(?:3(?:\.\d+)?)?", before):
            if word == "sync":
                files.extend(w for w in words[i + 1 : i + 2] if not w.startswith("-"))
                continue
            for target in words[i + 1 :]:
                if set(target) <= set(";&|"):
                    break
                match = _NAME.match(target)
                if match and not target.startswith("-"):
                    names.add(normalize(match.group(1)))
    return Named(frozenset(names), tuple(files))


@dataclass(frozen=True)
class Change:
    """One package a run changed: versions before and after (None where absent) and the
    evidence. ``before_known`` is False where the output cannot tell whether the package was
    there before (a pasted pip tail with only its ``Successfully installed`` line)."""

    name: str
    before: str | None
    after: str | None
    evidence: tuple[Evidence, ...] = ()
    before_known: bool = True
    certain: bool = False  # from the package snapshots

    @property
    def key(self) -> str:
        return normalize(self.name)

    @property
    def kind(self) -> str:
        """added, removed, upgraded, downgraded, reinstalled or variant-switched."""
        if self.before is None:
            return "added"
        if self.after is None:
            return "removed"
        old, new = parse_version(self.before), parse_version(self.after)
        if old == new:
            return "reinstalled"
        if parse_version(old.public) == parse_version(new.public):
            return "variant-switched"
        return "upgraded" if new > old else "downgraded"

    @property
    def major_down(self) -> bool:
        """Whether the major version went down (numpy 2.x → 1.x)."""
        if self.before is None or self.after is None:
            return False
        old, new = parse_version(self.before).major, parse_version(self.after).major
        return old is not None and new is not None and new < old

    def text(self) -> str:
        """``numpy 2.4.2 → 2.4.1``."""
        if self.before is None:
            return f"{self.name} {self.after} (new)"
        if self.after is None:
            return f"{self.name} {self.before} (removed)"
        return f"{self.name} {self.before} → {self.after}"


@dataclass
class _Seen:
    name: str
    before: str | None = None
    after: str | None = None
    lines: list[Evidence] = field(default_factory=list)
    before_known: bool = False


def output_changes(run: Run) -> list[Change]:
    """The changes uv's or pip's output shows, in order of first mention; none for a dry run
    (its ``- torch==…`` / ``+ torch==…`` lines and ``Would install`` say what it would do)."""
    if dry_run(run):
        return []
    seen: dict[str, _Seen] = {}

    def entry(name: str) -> _Seen:
        return seen.setdefault(normalize(name), _Seen(name))

    uv_done = bool(grep_lines(run, UV_SUMMARY_FAST, UV_SUMMARY, "nstalled ", limit=1))
    for match, line in grep_lines(run, UV_LINE_FAST, UV_LINE, "- ", "+ ", "~ "):
        sign, name, version = match.groups()
        item = entry(name)
        item.lines.append(line)
        item.before_known = True
        if sign in "-~" and item.before is None:
            item.before = version
        if sign in "+~":
            item.after = version
    pip_complete = run.has("Installing collected packages")
    for match, line in grep_lines(run, PIP_FOUND_FAST, PIP_FOUND, "Found existing installation"):
        item = entry(match.group(1))
        item.lines.append(line)
        item.before_known = True
        if item.before is None:
            item.before = match.group(2)
    rolled_back = {
        normalize(m.group(1).rpartition("-")[0] or m.group(1))
        for m, _ in run.grep(PIP_ROLLBACK, "Rolling back", limit=5000)
    }
    for match, line in grep_lines(
        run, PIP_INSTALLED_FAST, PIP_INSTALLED, "Successfully installed", limit=50
    ):
        for token in match.group(1).split():
            name, _, version = token.rpartition("-")
            if not name or not version[:1].isdigit():
                continue
            item = entry(name)
            item.lines.append(line)
            item.after = version
            item.before_known = item.before_known or pip_complete
    for match, line in grep_lines(
        run, PIP_UNINSTALLED_FAST, PIP_UNINSTALLED, "Successfully uninstalled"
    ):
        name, _, version = match.group(1).rpartition("-")
        if name and normalize(name) in seen and normalize(name) not in rolled_back:
            seen[normalize(name)].lines.append(line)
    for conda in conda_plan(run):
        if conda.downloaded:
            continue
        item = entry(conda.name)
        item.lines.append(conda.line)
        item.before_known = True
        if conda.before is not None:
            item.before = item.before or conda_version(conda.before, conda.before_build)
        item.after = conda_version(conda.after, conda.after_build) if conda.after else None
    found = []
    for key, item in seen.items():
        if key in rolled_back or (item.before is None and item.after is None):
            continue
        if item.after is None and not (
            uv_done or run.has("Successfully uninstalled", "will be REMOVED")
        ):
            continue  # pip found it but the output never says it went
        found.append(
            Change(item.name, item.before, item.after, tuple(item.lines), item.before_known)
        )
    return found


def changes(run: Run) -> list[Change]:
    """What ``run`` changed: from its package snapshots when the journal has them (with the
    output lines as extra evidence), else from its output."""
    from_output = output_changes(run)
    if run.diff is None:
        return from_output
    lines = {c.key: c.evidence for c in from_output}
    return [
        Change(
            change.name,
            change.before,
            change.after,
            (
                Evidence(f"package snapshots: {change_text(change)}", None, run.event, run.key),
                *lines.get(change.key, ()),
            ),
            True,
            True,
        )
        for change in run.diff.changes
    ]


def unique(evidence: Iterable[Evidence]) -> list[Evidence]:
    """The evidence without repeats (pip's one `Successfully installed` line shows several
    changes), in order."""
    seen: set[tuple[int | None, int | None, str]] = set()
    out = []
    for ev in evidence:
        key = (ev.event, ev.line, ev.text)
        if key not in seen:
            seen.add(key)
            out.append(ev)
    return out


def short(run: Run) -> str:
    """The command as a title quotes it: the install with its named packages, or its start."""
    for req in requests(run.command):
        verb = {"uv": "uv pip install", "pip": "pip install"}.get(req.tool, f"{req.tool} install")
        words = [verb]
        words += [r.name + (r.spec or "") for r in req.packages] or ["…"]
        words += [o for o in req.options if o in SHOWN_OPTIONS]
        return f"`{' '.join(dict.fromkeys(words))}`"
    text = " ".join(run.command.split())
    return f"`{text[:60]}{'…' if len(text) > 60 else ''}`"


def tool(command: str) -> str:
    """``uv`` or ``pip``: the installer ``command`` runs (pip when it cannot tell)."""
    reqs = requests(command)
    if reqs:
        return reqs[0].tool
    return "uv" if any(w.rsplit("/", 1)[-1] == "uv" for w in shell_words(command)) else "pip"


def dry_run(run: Run) -> bool:
    """Whether the run's uv and pip installs were all dry runs (``--dry-run``): they read
    metadata, resolved, printed their plan and changed nothing."""
    if "--dry-run" not in run.command:
        return False
    installs = [r for r in requests(run.command) if r.tool in ("uv", "pip")]
    return bool(installs) and all("--dry-run" in r.options for r in installs)


_ENV_FILE = re.compile(
    r"\b(?:conda|mamba|micromamba)\s+env\s+(?:create|update)\b.*?(?:-f|--file)[ =](\S+)"
)


def requests_of(subject: Subject, run: Run) -> tuple[InstallRequest, ...]:
    """What ``run`` asked to install: its command's requests, and for `conda env create -f
    FILE` the dependencies of FILE where the session printed it (`cat environment.yml`)."""
    found = requests(run.command)
    env_file = _ENV_FILE.search(run.command) if "env" in run.command else None
    if env_file is None:
        return found
    name = env_file.group(1).rsplit("/", 1)[-1]
    for other in subject.runs:
        if other is run:
            break
        if other.host == run.host and re.match(
            rf"^\s*cat\s+\S*{re.escape(name)}\s*$", other.command
        ):
            specs = re.findall(r"^[ \t]*-[ \t]+([A-Za-z0-9_][^\s#]*)", other.text, re.M)
            return (*found, *install_requests("conda install " + " ".join(specs)))
    return found


class TorchInstalls:
    """The installs that named torch, per host, in order: ``before(run)`` lists those that came
    before ``run`` on its host, nearest first (one pass over the subject, however many ask)."""

    def __init__(self, subject: Subject) -> None:
        self._by_host: dict[str, list[tuple[Run, InstallRequest]]] = {}
        self._seen: dict[int, int] = {}
        for run in subject.runs:
            found = self._by_host.setdefault(run.host, [])
            self._seen[id(run)] = len(found)
            if "torch" in run.command:
                found.extend((run, r) for r in requests(run.command) if "torch" in r.names())

    def before(self, run: Run, limit: int = 50) -> Iterator[tuple[Run, InstallRequest]]:
        found = self._by_host.get(run.host, [])
        end = self._seen.get(id(run), 0)
        for index in range(end - 1, max(end - limit, 0) - 1, -1):
            yield found[index]
