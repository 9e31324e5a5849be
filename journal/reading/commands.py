"""Reading install commands: which packages a `pip install` / `uv pip install` (or a `conda`,
`mamba`, `micromamba` install) asked for, from which index and which variant (``cu130``), and
whether it forced a reinstall or an upgrade."""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field

from journal.versions import canonical_name, local_variant

#: Options that take a value (the value is not a package).
VALUE_OPTIONS = {
    "-i",
    "--index-url",
    "--extra-index-url",
    "--index",
    "--default-index",
    "-f",
    "--find-links",
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "--constraints",
    "-p",
    "--python",
    "--target",
    "-t",
    "--prefix",
    "--root",
    "--torch-backend",
    "--index-strategy",
    "--resolution",
    "--prerelease",
    "--python-version",
    "--python-platform",
    "--cache-dir",
    "-e",
    "--editable",
    "--upgrade-package",
    "-P",
    "--reinstall-package",
    "--config-settings",
    "-C",
    "--trusted-host",
    "--src",
    "--progress-bar",
    "--log",
    "--platform",
    "--implementation",
    "--abi",
    "--only-binary",
    "--no-binary",
    "--keyring-provider",
    "--link-mode",
    "--exclude-newer",
    "-w",
    "--overrides",
    "--override",
    "--build-constraints",
    "-b",
    "--group",
    "--extra",
    "--color",
    "--python-preference",
    "--directory",
    "--project",
    "--config-file",
}
#: The options that say where packages come from, by the kind of source each gives.
SOURCE_OPTIONS = {
    "-i": "index-url",
    "--index-url": "index-url",
    "--default-index": "index-url",
    "--extra-index-url": "extra-index-url",
    "--index": "extra-index-url",
    "-f": "find-links",
    "--find-links": "find-links",
}
_REQ = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?P<spec>(?:===|==|~=|!=|>=|<=|<|>)\s*\S+)?$"
)
_VARIANT = re.compile(r"\b(cu\d{2,3}|rocm\d+(?:\.\d+)*|cpu|xpu)\b")


@dataclass(frozen=True)
class Requirement:
    """A package named on the command line, with its version spec if any."""

    name: str
    spec: str | None = None

    @property
    def key(self) -> str:
        return canonical_name(self.name)

    @property
    def pinned(self) -> str | None:
        """The exact version of an ``==`` pin."""
        if self.spec and self.spec.startswith("==") and not self.spec.startswith("==="):
            return self.spec[2:].strip()
        return None

    @property
    def variant(self) -> str | None:
        """``cu130`` of ``torch==2.12.0+cu130``."""
        pinned = self.pinned
        return local_variant(pinned)


@dataclass(frozen=True)
class InstallRequest:
    """One `pip install` or `uv pip install` found in a shell command."""

    tool: str  # "uv" or "pip"
    packages: tuple[Requirement, ...]
    indexes: tuple[str, ...] = ()
    reinstall: bool = False
    upgrade: bool = False
    requirement_files: tuple[str, ...] = ()
    raw: str = ""
    options: tuple[str, ...] = field(default=())
    #: the variant a conda install asks for with a package (``pytorch-cuda=12.1``: cu121,
    #: ``cpuonly``: cpu; ``cuda`` where no version is named)
    asked: str | None = None
    #: where it looks for packages, each option's kind and value in the order given:
    #: ``("index-url", URL)`` (``-i``, ``--index-url``, uv's ``--default-index``),
    #: ``("extra-index-url", URL)`` (also uv's ``--index``), ``("find-links", PATH|URL)``
    #: (``-f``); ``indexes`` holds the same values without their kinds
    sources: tuple[tuple[str, str], ...] = ()

    @property
    def variant(self) -> str | None:
        """The variant asked for: a pin's local version, else the index URL's (``…/cu130``);
        for conda, what its packages ask for."""
        if self.asked:
            return self.asked
        for req in self.packages:
            if req.variant:
                return req.variant
        return self.index_variant

    @property
    def asks_for_something_new(self) -> bool:
        """Another index, a variant, or a name without a pin: things a no-op silently ignores.
        Exact pins of whole builds (``torch==2.9.1+cu128`` from the cu128 index) ask for
        nothing an installed copy that satisfies them is not: a torch pin without its local
        version (``torch==2.9.1``) from a variant's index still asks for that variant."""
        if any(r.spec is None for r in self.packages):
            return True
        if all(r.pinned and "*" not in r.pinned for r in self.packages):
            index = self.index_variant
            return index is not None and any(
                r.key.startswith("torch") and r.variant != index for r in self.packages
            )
        return bool(self.indexes) or self.variant is not None

    @property
    def index_variant(self) -> str | None:
        """The variant the index URL names (``…/whl/cu130``)."""
        for url in self.indexes:
            found = _VARIANT.search(url.rsplit("/", 2)[-1] if url else "") or _VARIANT.search(url)
            if found:
                return found.group(1)
        return None

    def names(self) -> set[str]:
        return {r.key for r in self.packages}


def shell_words(command: str) -> list[str]:
    """The words of a shell line as the shell splits them (quotes removed), its operators
    (``&&``, ``||``, ``;``, ``|``) words of their own; split at whitespace where the quoting
    does not close. The one tokeniser of install commands: :func:`shell_pieces` and
    :func:`journal.reading.installs.named` read these words."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:
        return command.split()


def shell_pieces(command: str) -> list[list[str]]:
    """The simple commands of a shell line, split at ``&&``, ``||``, ``;``, ``|``."""
    pieces: list[list[str]] = [[]]
    for token in shell_words(command):
        if token and set(token) <= set(";&|"):
            pieces.append([])
        else:
            pieces[-1].append(token)
    return [p for p in pieces if p]


def install_requests(command: str) -> list[InstallRequest]:
    """Every pip / uv pip install in ``command``."""
    if "install" not in command:
        return []
    return list(_install_requests(command))


@functools.lru_cache(maxsize=4096)
def _install_requests(command: str) -> tuple[InstallRequest, ...]:
    found = []
    for words in shell_pieces(command):
        for i, word in enumerate(words):
            base = word.rsplit("/", 1)[-1]
            if base == "uv" and words[i + 1 : i + 3] == ["pip", "install"]:
                found.append(_parse("uv", words[i + 3 :], command))
                break
            if re.fullmatch(r"pip(?:3(?:\.\d+)?)?", base) and words[i + 1 : i + 2] == ["install"]:
                found.append(_parse("pip", words[i + 2 :], command))
                break
            if base in CONDAS and words[i + 1 : i + 2] in (["install"], ["create"], ["update"]):
                found.append(_conda(base, words[i + 2 :], command))
                break
            if re.fullmatch(r"python(?:3(?:\.\d+)?)?", base) and words[i + 1 : i + 4] == [
                "-m",
                "pip",
                "install",
            ]:
                found.append(_parse("pip", words[i + 4 :], command))
                break
    return tuple(found)


def _arguments(
    args: list[str], value_options: set[str], bare_takes_next: bool
) -> Iterator[tuple[str | None, str, str]]:
    """Each argument of an install as (option, its value, the argument): the option ``None``
    for a positional one. An option of ``value_options`` written without ``=VALUE`` takes the
    next argument as its value (``bare_takes_next``: pip's ``--index-url=`` with nothing after
    the ``=`` does too; conda's does not)."""
    skip = False
    for index, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if not arg.startswith("-"):
            yield None, "", arg
            continue
        name, eq, value = arg.partition("=")
        if name in value_options and not (value if bare_takes_next else eq):
            value = args[index + 1] if index + 1 < len(args) else ""
            skip = True
        yield name, value, arg


def _parse(tool: str, args: list[str], raw: str) -> InstallRequest:
    packages, indexes, files, options = [], [], [], []
    sources: list[tuple[str, str]] = []
    reinstall = upgrade = False
    for name, value, arg in _arguments(args, VALUE_OPTIONS, bare_takes_next=True):
        if name is not None:
            options.append(name)
            if name in ("--reinstall", "--force-reinstall") or name == "--reinstall-package":
                reinstall = True
            if name in ("-U", "--upgrade", "--upgrade-package", "-P"):
                upgrade = True
            if name in VALUE_OPTIONS:
                kind = SOURCE_OPTIONS.get(name)
                if kind is not None:
                    indexes.append(value)
                    sources.append((kind, value))
                if name in ("-r", "--requirement"):
                    files.append(value)
            continue
        match = _REQ.match(arg.strip())
        if match:
            spec = match.group("spec")
            packages.append(
                Requirement(match.group("name"), spec.replace(" ", "") if spec else None)
            )
    return InstallRequest(
        tool,
        tuple(packages),
        tuple(indexes),
        reinstall,
        upgrade,
        tuple(files),
        raw,
        tuple(options),
        sources=tuple(sources),
    )


#: The conda front ends whose `install` / `create` is read.
CONDAS = ("conda", "mamba", "micromamba")
#: conda options that take a value.
CONDA_VALUE_OPTIONS = {
    "-c",
    "--channel",
    "-n",
    "--name",
    "-p",
    "--prefix",
    "--file",
    "--override-channels-with",
    "--solver",
    "--repodata-fn",
}
_CONDA_SPEC = re.compile(r"^(?:[\w.-]+::)?(?P<name>[A-Za-z0-9_][A-Za-z0-9._-]*)(?P<rest>.*)$")


def _conda(tool: str, args: list[str], raw: str) -> InstallRequest:
    """A conda install: its package specs (``pytorch==1.12.1``, ``pytorch-cuda=12.1``,
    ``"pytorch>=2"``; conda's ``pytorch`` is torch), channels and the variant they ask for."""
    packages, channels, options = [], [], []
    asked = None
    for name, value, arg in _arguments(args, CONDA_VALUE_OPTIONS, bare_takes_next=False):
        if name is not None:
            options.append(name)
            if name in ("-c", "--channel"):
                channels.append(value)
            continue
        match = _CONDA_SPEC.match(arg.strip())
        if not match:
            continue
        name, rest = match.group("name"), match.group("rest").strip()
        version = re.match(r"^=?=?\s*([\d.]+)", rest)
        if name in ("pytorch-cuda", "cudatoolkit", "cuda-toolkit", "cuda-version"):
            digits = version.group(1).split(".")[:2] if version else []
            asked = f"cu{''.join(digits)}" if len(digits) == 2 else (asked or "cuda")
        elif name == "cpuonly":
            asked = "cpu"
        elif name == "pytorch" and "cuda" in rest:
            asked = asked or "cuda"  # pytorch=*=*cuda*
        key = "torch" if name in ("pytorch", "pytorch-nightly") else name
        spec = rest if rest and rest[0] in "=<>!~" else None
        packages.append(Requirement(key, spec))
    return InstallRequest(
        tool, tuple(packages), tuple(channels), False, False, (), raw, tuple(options), asked
    )


def same_variant(found: str | None, asked: str) -> bool:
    """Whether a build's variant (``cu128``, ``cpu``) is the one asked for (``cuda``: any)."""
    if found is None:
        return False
    if asked == "cuda":
        return found.startswith("cu") and found[2:3].isdigit()
    return found == asked


def cuda_of_variant(variant: str | None) -> str | None:
    """``13.0`` for ``cu130``, ``12.8`` for ``cu128``, ``11.8`` for ``cu118``."""
    if not variant or not re.fullmatch(r"cu\d{2,3}", variant):
        return None
    digits = variant[2:]
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else None
