"""Reading install commands: which packages a `pip install` / `uv pip install` asked for, from
which index and which variant (``cu130``), and whether it forced a reinstall or an upgrade."""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass, field

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
        return re.sub(r"[-_.]+", "-", self.name).lower()

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
        return pinned.split("+", 1)[1] if pinned and "+" in pinned else None


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

    @property
    def variant(self) -> str | None:
        """The variant asked for: a pin's local version, else the index URL's (``…/cu130``)."""
        for req in self.packages:
            if req.variant:
                return req.variant
        for url in self.indexes:
            found = _VARIANT.search(url.rsplit("/", 2)[-1] if url else "") or _VARIANT.search(url)
            if found:
                return found.group(1)
        return None

    @property
    def asks_for_something_new(self) -> bool:
        """Another index, a variant, or a name without a pin: things a no-op silently ignores."""
        return (
            bool(self.indexes)
            or self.variant is not None
            or any(r.spec is None for r in self.packages)
        )

    def names(self) -> set[str]:
        return {r.key for r in self.packages}


def shell_pieces(command: str) -> list[list[str]]:
    """The simple commands of a shell line, split at ``&&``, ``||``, ``;``, ``|``."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = command.split()
    pieces: list[list[str]] = [[]]
    for token in tokens:
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
            if re.fullmatch(r"python(?:3(?:\.\d+)?)?", base) and words[i + 1 : i + 4] == [
                "-m",
                "pip",
                "install",
            ]:
                found.append(_parse("pip", words[i + 4 :], command))
                break
    return tuple(found)


def _parse(tool: str, args: list[str], raw: str) -> InstallRequest:
    packages, indexes, files, options = [], [], [], []
    reinstall = upgrade = False
    skip = False
    for index, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg.startswith("-"):
            name, _, value = arg.partition("=")
            options.append(name)
            if name in ("--reinstall", "--force-reinstall") or name == "--reinstall-package":
                reinstall = True
            if name in ("-U", "--upgrade", "--upgrade-package", "-P"):
                upgrade = True
            if name in VALUE_OPTIONS:
                if not value:
                    value = args[index + 1] if index + 1 < len(args) else ""
                    skip = True
                if name in (
                    "-i",
                    "--index-url",
                    "--extra-index-url",
                    "--index",
                    "--default-index",
                    "-f",
                    "--find-links",
                ):
                    indexes.append(value)
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
        tool, tuple(packages), tuple(indexes), reinstall, upgrade, tuple(files), raw, tuple(options)
    )


def cuda_of_variant(variant: str | None) -> str | None:
    """``13.0`` for ``cu130``, ``12.8`` for ``cu128``, ``11.8`` for ``cu118``."""
    if not variant or not variant.startswith("cu"):
        return None
    digits = variant[2:]
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else None
