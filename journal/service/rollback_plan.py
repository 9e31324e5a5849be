"""A rollback's plan for one host (:class:`HostPlan`): with which installer, what it installs
at the target's exact version (local label included: ``torch==2.10.0+cu128``) and from where
(:class:`Source`), what it removes (never pip), what it keeps, what stays; and the command and
step of the recorded run that carries it out."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from journal.runbook import Runbook, Step
from journal.service.rollback_target import Target

#: The step name of every rollback run.
STEP = "rollback"
#: Never removed by a rollback, even when the target set lacks it: it is how pip rolls back.
KEEP = ("pip",)


@dataclass(frozen=True)
class Source:
    """Where a package is installed from: a recorded install's index options (``recorded``,
    ``run`` the run that brought the version), the snapshot's ``direct-url``, or the host's
    ``default`` index (no option: the host's pip or uv configuration decides)."""

    kind: str
    options: tuple[tuple[str, str], ...] = ()
    run: str | None = None
    url: str | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.kind, self.options, self.url)

    def args(self) -> list[str]:
        """The install options: ``--index-url URL``, ``--extra-index-url URL``, …"""
        return [word for kind, value in self.options for word in (f"--{kind}", value)]

    def describe(self) -> str:
        if self.kind == "direct-url":
            return f"its direct URL {self.url}"
        if self.kind == "default":
            return "the host's default index"
        shown = " ".join(shlex.quote(a) for a in self.args())
        return f"{shown} (as run {self.run} installed it)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "options": [[kind, value] for kind, value in self.options],
            "run": self.run,
            "url": self.url,
        }


@dataclass(frozen=True)
class Install:
    """A package to install at the target's exact version, from ``source``."""

    name: str
    display: str
    version: str
    current: str | None
    source: Source
    tried: tuple[Source, ...] = ()

    @property
    def pin(self) -> str:
        if self.source.kind == "direct-url":
            return f"{self.display} @ {self.source.url}"
        return f"{self.display}=={self.version}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "current": self.current,
            "pin": self.pin,
            "source": self.source.to_dict(),
            "unavailable_from": [s.to_dict() for s in self.tried],
        }


@dataclass(frozen=True)
class HostPlan:
    """What a rollback does on one host: with which installer, what it installs (and from
    where), what it removes, what it keeps though the target lacks it, what stays."""

    host: str
    target: Target
    installer: str  # "uv" or "pip"
    uv: str | None
    python: str
    install: list[Install]
    remove: list[tuple[str, str]]
    kept: list[tuple[str, str]]
    unchanged: list[str]
    #: packages the rollback replaces or removes that another installer put there (conda,
    #: the system's package manager): (name, version, installer)
    foreign: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.install and not self.remove

    def groups(self) -> list[tuple[Source, list[Install]]]:
        """The installs by source, in the order their sources first come."""
        out: dict[tuple[Any, ...], tuple[Source, list[Install]]] = {}
        for item in self.install:
            out.setdefault(item.source.key, (item.source, []))[1].append(item)
        return list(out.values())

    def command(self) -> str:
        """The shell command of the rollback run."""
        py = shell_path(self.python)
        parts = []
        names = [shlex.quote(name) for name, _ in self.remove]
        if self.installer == "uv":
            assert self.uv is not None
            uv = shell_path(self.uv)
            if names:
                parts.append(f"{uv} pip uninstall --python {py} {' '.join(names)}")
            for source, items in self.groups():
                reinstall = [w for i in items for w in ("--reinstall-package", i.display)]
                words = [*reinstall, *(i.pin for i in items), *source.args()]
                quoted = " ".join(shlex.quote(w) for w in words)
                parts.append(f"{uv} pip install --python {py} --no-deps {quoted}")
        else:
            if names:
                parts.append(f"{py} -m pip uninstall -y {' '.join(names)}")
            for source, items in self.groups():
                words = [*(i.pin for i in items), *source.args()]
                quoted = " ".join(shlex.quote(w) for w in words)
                parts.append(f"{py} -m pip install --no-deps --force-reinstall {quoted}")
        if not parts:
            count = len(self.unchanged)
            return (
                f"echo 'journal rollback: the env already holds the target set ({count} "
                "packages): nothing to install or remove'"
            )
        return " && ".join(parts)

    def rollback_field(self) -> dict[str, Any]:
        """``StepStarted.rollback`` of its run."""
        target = self.target
        return {
            "to": target.to,
            "run": target.run,
            "phase": target.phase,
            "event": target.seq,
            "packages": target.packages,
        }

    def step(self, runbook: Runbook) -> Step:
        """The rollback's step: its command, snapshots, and the torch-env probe when the
        target set holds torch."""
        probes = (
            ["torch-env"]
            if "torch" in self.target.entries and "torch-env" in (runbook.probes)
            else []
        )
        return Step(
            STEP,
            self.command(),
            probes=probes,
            description=f"roll back to {self.target.describe()}",
        )

    def to_dict(self) -> dict[str, Any]:
        target = self.target
        return {
            "host": self.host,
            "target": {
                "to": target.to,
                "run": target.run,
                "step": target.step,
                "phase": target.phase,
                "started": target.started,
                "packages": target.packages,
            },
            "installer": self.installer,
            "uv": self.uv,
            "python": self.python,
            "install": [i.to_dict() for i in self.install],
            "remove": [{"name": n, "version": v} for n, v in self.remove],
            "kept": [{"name": n, "version": v, "why": KEPT_WHY} for n, v in self.kept],
            "unchanged": self.unchanged,
            "foreign": [{"name": n, "version": v, "installer": i} for n, v, i in self.foreign],
            "command": self.command(),
        }


KEPT_WHY = "never removed by a rollback: pip is how an env without uv rolls back"


def shell_path(path: str) -> str:
    """A path for the host's shell: as written when it is plain (so that ``~`` expands),
    else quoted."""
    if re.fullmatch(r"[\w./+@:~-]+", path):
        return path
    return shlex.quote(path)

